"""Server-side request forgery: http jobs, Slack and webhook channels pointed at the service's own
network. A literal address is refused when the job or channel is saved (a 400 on the field, nothing
saved); a name is refused when the request is made (the attempt fails saying why), and the server
inside never sees a request."""

import socket

import pytest
from django.core.exceptions import ValidationError

import outbound
from jobs.definitions.jobs import save_job
from jobs.kinds import http as http_kind
from jobs.kinds.base import JobFailed, JobTimedOut, RunContext
from jobs.models import Job, JobRun
from notifications.models import Channel, Delivery, DeliveryStatus
from notifications.sending import send_delivery

from ..conftest import wait_for
from .servers import streaming, trickling

LITERALS = [
    ("loopback", "http://127.0.0.1:{port}/"),
    ("loopback elsewhere in 127/8", "http://127.9.9.9:{port}/"),
    ("decimal", "http://2130706433:{port}/"),
    ("octal", "http://0177.0.0.1:{port}/"),
    ("hex", "http://0x7f.0.0.1:{port}/"),
    ("short", "http://127.1:{port}/"),
    ("ipv6 loopback", "http://[::1]:{port}/"),
    ("ipv4-mapped ipv6", "http://[::ffff:127.0.0.1]:{port}/"),
    ("ipv4-mapped ipv6, hex", "http://[::ffff:7f00:1]:{port}/"),
    ("nat64", "http://[64:ff9b::7f00:1]:{port}/"),
    ("6to4", "http://[2002:7f00:1::]:{port}/"),
    ("metadata", "http://169.254.169.254/latest/meta-data/"),
    ("azure metadata", "http://168.63.129.16/metadata"),
    ("private 10/8", "http://10.0.0.1/"),
    ("private 172.16/12", "http://172.16.5.4/"),
    ("private 192.168/16", "https://192.168.1.1/"),
    ("shared 100.64/10", "http://100.100.100.200/"),
    ("unspecified", "http://0.0.0.0:{port}/"),
    ("multicast", "http://224.0.0.1/"),
    ("link-local ipv6", "http://[fe80::1]/"),
    ("unique local ipv6", "http://[fd00:ec2::254]/"),
]


def context(job, timeout=10):
    job.timeout_seconds = timeout
    return RunContext(run_id=1, attempt=1, job=job, timeout_seconds=timeout)


@pytest.mark.parametrize("url", [url for _, url in LITERALS], ids=[name for name, _ in LITERALS])
def test_an_http_job_at_an_internal_literal_address_is_refused_when_saved(people, inside, url):
    response = people.api(people.owner).post("/api/jobs/", {
        "name": "probe", "kind": "http", "target": url.format(port=inside.port)}, format="json")
    assert response.status_code == 400
    [message] = response.json()["target"]
    assert "outbound requests may not reach it" in message
    assert not Job.objects.exists() and inside.hits == []


def test_an_http_job_edited_to_an_internal_address_is_refused_and_kept(people):
    job = save_job(Job(name="ping", kind="http", target="https://example.invalid/", owner=people.owner),
                   {"type": "manual"})
    response = people.api(people.owner).patch(f"/api/jobs/{job.pk}/", {"target": "http://169.254.169.254/"},
                                              format="json")
    assert response.status_code == 400 and "target" in response.json()
    job.refresh_from_db()
    assert job.target == "https://example.invalid/"


@pytest.mark.parametrize("url", ["http://user:pw@example.invalid/", "file:///etc/passwd", "gopher://example.invalid/",
                                 "http://example.invalid/\r\nX-Injected: 1", "http://exa mple.invalid/"])
def test_an_http_job_with_a_url_that_is_not_plain_http_is_refused(people, url):
    response = people.api(people.owner).post("/api/jobs/", {"name": "probe", "kind": "http", "target": url},
                                             format="json")
    assert response.status_code == 400 and "target" in response.json()
    assert not Job.objects.exists()


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST"])
def test_a_name_that_resolves_inside_is_refused_when_the_attempt_runs(inside, host):
    job = Job(name="probe", kind="http", target=f"http://{host}:{inside.port}/")
    http_kind.validate(job)  # a name passes when saved
    with pytest.raises(JobFailed) as refused:
        http_kind.execute(context(job))
    assert str(refused.value).startswith("Refused: ") and "loopback" in str(refused.value)
    assert inside.hits == []


def test_a_job_at_localhost_fails_through_a_real_worker_and_reaches_nothing(processes, people, inside):
    created = people.api(people.owner).post("/api/jobs/", {
        "name": "probe", "kind": "http", "target": f"http://localhost:{inside.port}/accounts/login/"}, format="json")
    assert created.status_code == 201, created.json()
    processes.worker()
    run_id = people.api(people.owner).post(f"/api/jobs/{created.json()['id']}/run/").json()["id"]
    wait_for(lambda: JobRun.objects.get(pk=run_id).is_terminal, timeout=60, message="the run to end")
    shown = people.api(people.owner).get(f"/api/runs/{run_id}/").json()
    assert shown["status"] == "failed"
    assert "Refused: localhost (127.0.0.1) is a loopback address" in shown["error"]
    assert "secret page" not in shown["output"] and inside.hits == []


def test_a_redirect_to_an_internal_address_is_refused(only_outside_allowed, outside, inside):
    outside.routes["/go"] = (302, {"Location": f"{inside.url}/admin/"}, b"")
    job = Job(name="probe", kind="http", target=f"{outside.url}/go")
    with pytest.raises(JobFailed, match="Refused: 127.0.0.1 is a loopback address"):
        http_kind.execute(context(job))
    assert [hit["path"] for hit in outside.hits] == ["/go"] and inside.hits == []


def test_the_connection_goes_to_the_address_that_was_checked(only_outside_allowed, outside, inside):
    """DNS rebinding: a name that resolves outside when checked and inside a moment later. The
    request is made to the checked address; the name is resolved once."""
    answers = []

    def rebinding(host, port, **kwargs):
        address = "127.0.0.2" if not answers else "127.0.0.1"
        answers.append(address)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    policy = outbound.Policy(allowed_networks=outbound.parse_networks(["127.0.0.2/32"]), resolve=rebinding)
    response = outbound.fetch("GET", f"http://rebind.example.invalid:{outside.port}/", policy=policy)
    assert (response.status, response.address, answers) == (200, "127.0.0.2", ["127.0.0.2"])
    assert outside.hits[0]["headers"]["Host"] == f"rebind.example.invalid:{outside.port}"
    assert inside.hits == []


def test_a_name_with_one_internal_address_among_public_ones_is_refused(inside):
    def mixed(host, port, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)) for address in ("8.8.8.8", "127.0.0.1")]

    with pytest.raises(outbound.Refused, match=r"mixed.example.invalid \(127.0.0.1\) is a loopback address"):
        outbound.fetch("GET", f"http://mixed.example.invalid:{inside.port}/", policy=outbound.Policy(resolve=mixed))
    assert inside.hits == []


@pytest.mark.parametrize("kind", ["webhook", "slack"])
@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/hook", "http://[::1]/", "http://169.254.169.254/",
                                 "http://2130706433/"])
def test_a_channel_pointed_inside_is_refused_when_saved(admin_client, kind, url):
    response = admin_client.post("/admin/notifications/channel/add/", {
        "name": "inside", "kind": kind, "config": f'{{"url": "{url}"}}', "enabled": "on",
        "created_at_0": "2026-01-01", "created_at_1": "00:00:00"})
    assert response.status_code == 200
    assert "outbound requests may not reach it" in response.content.decode()
    assert not Channel.objects.exists()
    with pytest.raises(ValidationError):
        Channel(name="inside", kind=kind, config={"url": url}).full_clean()


def test_a_webhook_whose_name_resolves_inside_is_refused_when_sent(db, inside):
    channel = Channel.objects.create(name="hook", kind="webhook", config={"url": f"http://localhost:{inside.port}/"})
    delivery = Delivery.objects.create(event="failed", channel=channel, dedup_key="d1", payload={"event": "failed"},
                                       next_attempt_at="2000-01-01T00:00:00Z")
    assert send_delivery(delivery.pk) == DeliveryStatus.FAILED
    channel.refresh_from_db()
    assert not channel.enabled and "refused: localhost (127.0.0.1) is a loopback address" in channel.disabled_reason
    assert inside.hits == []


def test_an_oversized_answer_is_cut_off_and_fails_the_attempt(only_outside_allowed, outside, settings):
    settings.JOBS_HTTP_MAX_RESPONSE_BYTES = 1024 * 1024
    outside.routes["/huge"] = streaming(50 * 1024 * 1024)
    with pytest.raises(JobFailed, match="larger than 1048576 bytes; stopped reading"):
        http_kind.execute(context(Job(name="big", kind="http", target=f"{outside.url}/huge")))


def test_an_answer_trickling_past_the_timeout_is_cut_off(only_outside_allowed, outside):
    outside.routes["/drip"] = trickling(seconds=20)
    with pytest.raises(JobTimedOut):
        http_kind.execute(context(Job(name="drip", kind="http", target=f"{outside.url}/drip"), timeout=2))


HEADER_ATTACKS = [
    ("crlf in a value", {"X-Note": "a\r\nX-Injected: 1"}),
    ("lf in a value", {"X-Note": "a\nX-Injected: 1"}),
    ("nul in a value", {"X-Note": "a\x00b"}),
    ("colon in a name", {"X-Note: 1\r\nX-Other": "v"}),
    ("space in a name", {"X Note": "v"}),
    ("host", {"Host": "metadata.google.internal"}),
    ("content-length", {"Content-Length": "0"}),
    ("transfer-encoding", {"Transfer-Encoding": "chunked"}),
    ("not text", {"X-Number": 5}),
]


@pytest.mark.parametrize("field", ["http_headers", "secret_http_headers"])
@pytest.mark.parametrize("headers", [h for _, h in HEADER_ATTACKS], ids=[n for n, _ in HEADER_ATTACKS])
def test_header_injection_in_an_http_job_is_refused_when_saved(people, field, headers):
    response = people.api(people.owner).post("/api/jobs/", {
        "name": "probe", "kind": "http", "target": "https://example.invalid/", field: headers}, format="json")
    assert response.status_code == 400 and field in response.json()
    assert not Job.objects.exists()


def test_an_oversized_api_body_is_refused(people):
    response = people.api(people.owner).post("/api/jobs/", {
        "name": "big", "kind": "http", "target": "https://example.invalid/", "http_body": "x" * 300_000},
        format="json")
    assert response.status_code == 413
    assert not Job.objects.exists()


def test_a_target_server_at_an_allowed_address_is_reached(only_outside_allowed, outside):
    """The control: the same path with an allowed address gets through, headers and all."""
    job = Job(name="ok", kind="http", target=f"{outside.url}/hook", http_method="POST", http_headers={"X-A": "1"})
    outcome = http_kind.execute(context(job))
    assert outcome.result["status"] == 200 and outside.hits[0]["headers"]["X-A"] == "1"
