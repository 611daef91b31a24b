"""Secret values stay bound to where they were given: whoever may edit a job (its owner, a teammate
of its group) cannot move an HTTP job's target to another scheme, host or port, or change its kind,
and keep the stored secret headers; nor move a webhook channel's URL and keep its signing secret.
The change passes once the secret values are given again (they then go to the new place) or
cleared. Tried through the API, a jobs file and the job form; the servers record where each header
arrives."""

import hashlib
import hmac
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from jobs.access import secrets
from jobs.kinds import http as http_kind
from jobs.kinds.base import RunContext
from jobs.models import Job
from notifications.models import Channel
from notifications.sending import send_test_notification

from ..test_job_forms import form_of, submit
from ..test_notifications_support import grant_channel_permissions, opened_config
from .servers import Target

SECRET = "Bearer bound-secret-4Kp9"
NEW_SECRET = "Bearer given-again-7Rx2"


@pytest.fixture
def origin(local_http_allowed):
    """Where the owner's job sends its secret header."""
    server = Target("127.0.0.2")
    yield server
    server.close()


@pytest.fixture
def elsewhere(local_http_allowed):
    """A host of someone else's choosing."""
    server = Target("127.0.0.3")
    yield server
    server.close()


@pytest.fixture
def hook(people, origin):
    response = people.api(people.owner).post("/api/jobs/", {
        "name": "hook", "kind": "http", "target": f"{origin.url}/hook", "group": "team",
        "secret_http_headers": {"Authorization": SECRET}}, format="json")
    assert response.status_code == 201, response.json()
    return Job.objects.get(name="hook")


def call(job):
    """What a run of the job sends (the HTTP kind's own call, as a worker makes it)."""
    job.refresh_from_db()
    http_kind.execute(RunContext(run_id=1, attempt=1, job=job, timeout_seconds=10))


def moved_message(before, after, what="secret headers"):
    return f"The target moved from {before} to {after}; give the {what} again (or clear them) to send them there."


@pytest.mark.parametrize("user", ["teammate", "owner"])
def test_moving_the_target_to_another_host_keeping_the_secret_is_refused(people, hook, origin, elsewhere, user):
    client = people.api(getattr(people, user))
    response = client.patch(f"/api/jobs/{hook.pk}/", {"target": f"{elsewhere.url}/steal"}, format="json")
    assert response.status_code == 400
    assert response.json()["secret_http_headers"] == [
        moved_message(f"http://127.0.0.2:{origin.port}", f"http://127.0.0.3:{elsewhere.port}")]
    # The mask sent back says "keep it": the same refusal.
    response = client.patch(f"/api/jobs/{hook.pk}/", {"target": f"{elsewhere.url}/steal", "secret_http_headers": {
        "Authorization": secrets.MASK}}, format="json")
    assert response.status_code == 400 and "secret_http_headers" in response.json()
    call(hook)
    assert elsewhere.hits == []
    assert [hit["headers"]["Authorization"] for hit in origin.hits] == [SECRET]
    # Another team's user does not even find the job.
    assert people.api(people.outsider).patch(f"/api/jobs/{hook.pk}/", {"target": f"{elsewhere.url}/x"},
                                             format="json").status_code == 404


def test_another_port_or_scheme_is_a_move_too(people, hook, origin, elsewhere):
    client = people.api(people.teammate)
    other_port = f"http://127.0.0.2:{elsewhere.port}/hook"
    response = client.patch(f"/api/jobs/{hook.pk}/", {"target": other_port}, format="json")
    assert response.json() == {"secret_http_headers": [
        moved_message(f"http://127.0.0.2:{origin.port}", f"http://127.0.0.2:{elsewhere.port}")]}
    response = client.patch(f"/api/jobs/{hook.pk}/", {"target": f"https://127.0.0.2:{origin.port}/hook"},
                            format="json")
    assert response.json() == {"secret_http_headers": [
        moved_message(f"http://127.0.0.2:{origin.port}", f"https://127.0.0.2:{origin.port}")]}
    hook.refresh_from_db()
    assert hook.target == f"{origin.url}/hook"


def test_the_same_origin_in_other_words_is_no_move_and_a_host_is_one(people, local_http_allowed):
    client = people.api(people.owner)
    created = client.post("/api/jobs/", {"name": "plain", "kind": "http", "target": "http://127.0.0.2/a",
                                         "secret_http_headers": {"Authorization": SECRET}}, format="json")
    assert created.status_code == 201, created.json()
    job_id = created.json()["id"]
    response = client.patch(f"/api/jobs/{job_id}/", {"target": "HTTP://127.0.0.2:80/b?page=2"}, format="json")
    assert response.status_code == 200, response.json()
    assert secrets.reveal(Job.objects.get(pk=job_id).secret_http_headers) == {"Authorization": SECRET}
    response = client.patch(f"/api/jobs/{job_id}/", {"target": "http://127.0.0.3/b"}, format="json")
    assert response.json() == {"secret_http_headers": [moved_message("http://127.0.0.2:80", "http://127.0.0.3:80")]}


def test_changing_the_kind_keeping_the_secret_is_refused(people, hook):
    client = people.api(people.owner)
    response = client.patch(f"/api/jobs/{hook.pk}/", {"kind": "callable", "target": "builtin.noop"}, format="json")
    assert response.status_code == 400
    assert response.json() == {"secret_http_headers": [
        "The job's kind changed from http to callable; give the secret headers again (or clear them) to send "
        "them there."]}
    response = client.patch(f"/api/jobs/{hook.pk}/", {"kind": "callable", "target": "builtin.noop",
                                                      "secret_http_headers": {}}, format="json")
    assert response.status_code == 200, response.json()
    hook.refresh_from_db()
    assert (hook.kind, hook.secret_http_headers) == ("callable", {})


def test_given_again_the_secret_goes_to_the_new_host(people, hook, origin, elsewhere):
    client = people.api(people.teammate)
    assert client.patch(f"/api/jobs/{hook.pk}/", {"target": f"{elsewhere.url}/new"}, format="json").status_code == 400
    response = client.patch(f"/api/jobs/{hook.pk}/", {
        "target": f"{elsewhere.url}/new", "secret_http_headers": {"Authorization": NEW_SECRET}}, format="json")
    assert response.status_code == 200, response.json()
    call(hook)
    assert origin.hits == []
    assert [(hit["path"], hit["headers"]["Authorization"]) for hit in elsewhere.hits] == [("/new", NEW_SECRET)]


def test_cleared_the_target_moves_without_them(people, hook, origin, elsewhere):
    client = people.api(people.teammate)
    assert client.patch(f"/api/jobs/{hook.pk}/", {"target": f"{elsewhere.url}/new"}, format="json").status_code == 400
    response = client.patch(f"/api/jobs/{hook.pk}/", {
        "target": f"{elsewhere.url}/new", "secret_http_headers": {}}, format="json")
    assert response.status_code == 200, response.json()
    call(hook)
    assert [hit["headers"].get("Authorization") for hit in elsewhere.hits] == [None]
    assert origin.hits == []


def test_a_jobs_file_that_moves_the_target_is_refused(people, hook, origin, elsewhere, tmp_path):
    exported = tmp_path / "jobs.json"
    call_command("jobs", "--as", "teammate", "export", str(exported), stdout=StringIO())
    document = json.loads(exported.read_text())
    entry = next(job for job in document["jobs"] if job["name"] == "hook")
    assert entry["secret_http_headers"] == {"Authorization": secrets.MASK}
    entry["target"] = f"{elsewhere.url}/steal"
    exported.write_text(json.dumps(document))
    with pytest.raises(CommandError, match="The target moved from .* give the secret headers again"):
        call_command("jobs", "--as", "teammate", "apply", str(exported), stdout=StringIO())
    hook.refresh_from_db()
    assert hook.target == f"{origin.url}/hook"

    entry["secret_http_headers"] = {"Authorization": NEW_SECRET}
    exported.write_text(json.dumps(document))
    call_command("jobs", "--as", "teammate", "apply", str(exported), stdout=StringIO())
    call(hook)
    assert [hit["headers"]["Authorization"] for hit in elsewhere.hits] == [NEW_SECRET]
    assert origin.hits == []


def test_the_job_form_refuses_the_move_until_the_secret_is_given_again(client, people, hook, origin, elsewhere):
    client.force_login(people.teammate)
    form = form_of(client, f"/jobs/{hook.pk}/edit/")
    assert form["secret_http_headers-value"] == [secrets.MASK, ""]
    response = submit(client, f"/jobs/{hook.pk}/edit/", form, target=f"{elsewhere.url}/steal")
    assert response.status_code == 400
    field = response.content.decode().split('id="field-secret_http_headers"')[1].split('<div class="field')[0]
    assert "The target moved from http://127.0.0.2:" in field and "give the secret headers again" in field
    hook.refresh_from_db()
    assert hook.target == f"{origin.url}/hook"

    response = submit(client, f"/jobs/{hook.pk}/edit/", form, target=f"{elsewhere.url}/new", **{
        "secret_http_headers-key": ["Authorization", ""], "secret_http_headers-value": [NEW_SECRET, ""]})
    assert response.status_code == 302
    call(hook)
    assert [hit["headers"]["Authorization"] for hit in elsewhere.hits] == [NEW_SECRET]


# --- channels


SIGNING_SECRET = "signing-secret-bound-3Tz"


@pytest.fixture
def manager(people):
    return grant_channel_permissions(people.staff)


@pytest.fixture
def webhook(people, manager, origin):
    response = people.api(manager).post("/api/channels/", {
        "name": "ops-hook", "kind": "webhook", "config": {"url": f"{origin.url}/in", "secret": SIGNING_SECRET}},
        format="json")
    assert response.status_code == 201, response.json()
    return Channel.objects.get(name="ops-hook")


def signed_with(hit, secret):
    expected = "sha256=" + hmac.new(secret.encode(), hit["body"], hashlib.sha256).hexdigest()
    return hit["headers"]["X-Signature"] == expected


def test_moving_a_webhook_keeping_its_signing_secret_is_refused(people, manager, webhook, origin, elsewhere):
    client = people.api(manager)
    response = client.patch(f"/api/channels/{webhook.pk}/", {"config": {
        "url": f"{elsewhere.url}/in", "secret": secrets.MASK}}, format="json")
    assert response.status_code == 400
    assert response.json()["config"] == [
        f"The URL moved from http://127.0.0.2:{origin.port} to http://127.0.0.3:{elsewhere.port}; give secret "
        "again (or clear it) to send it there."]
    assert opened_config(webhook) == {"url": f"{origin.url}/in", "secret": SIGNING_SECRET}

    # Another path on the same host keeps it.
    response = client.patch(f"/api/channels/{webhook.pk}/", {"config": {
        "url": f"{origin.url}/other", "secret": secrets.MASK}}, format="json")
    assert response.status_code == 200, response.json()

    response = client.patch(f"/api/channels/{webhook.pk}/", {"config": {
        "url": f"{elsewhere.url}/in", "secret": "a-new-signing-secret"}}, format="json")
    assert response.status_code == 200, response.json()
    webhook.refresh_from_db()
    sent, _ = send_test_notification(webhook)
    assert sent and origin.hits == []
    assert [signed_with(hit, "a-new-signing-secret") for hit in elsewhere.hits] == [True]


def test_the_admin_refuses_the_move_on_the_secret_field(client, people, hook, origin, elsewhere):
    from django.contrib.auth.models import User

    from ..test_admin import change_data

    root = User.objects.create_superuser("root")
    client.force_login(root)
    url = f"/admin/jobs/job/{hook.pk}/change/"
    data = change_data(0, name="hook", kind="http", target=f"{elsewhere.url}/steal", group=people.team.pk,
                       owner=people.owner.pk, schedule_type="manual", cron="", timezone="",
                       secret_environment="{}", secret_http_headers=json.dumps({"Authorization": secrets.MASK}))
    response = client.post(url, data)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"secret_http_headers": [
        moved_message(f"http://127.0.0.2:{origin.port}", f"http://127.0.0.3:{elsewhere.port}")]}
    hook.refresh_from_db()
    assert hook.target == f"{origin.url}/hook"
    data["secret_http_headers"] = json.dumps({"Authorization": NEW_SECRET})
    assert client.post(url, data).status_code == 302
    call(hook)
    assert [hit["headers"]["Authorization"] for hit in elsewhere.hits] == [NEW_SECRET]
