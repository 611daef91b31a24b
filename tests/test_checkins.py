"""Check-in jobs (jobs.kinds.checkin): jobs that run elsewhere and report by pinging the real web
server (gunicorn) the way a crontab line does (``curl -fsS -m 10 --retry 5 <url>``, from a shell on
this host); a slot with no ping ends failed and the ``missed`` alert reaches a local HTTP server
through the real scheduler and worker; too fast, too often; the ping endpoint's bad input; a DST
night of a check-in's schedule against the test's own oracle (tests/dst_oracle.py).

What is expected comes from the test's own clock (the moments around each ping) and its own scripts.
"""

import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.test import Client, override_settings

from jobs import kinds, lifecycle
from jobs.definitions.jobs import save_job
from jobs.lifecycle.pings import NO_PING
from jobs.models import Job, JobRun, RunStatus, RunTrigger
from jobs.scheduling import dispatch
from notifications.models import Delivery

from . import dst_oracle
from .cli_support import Web
from .conftest import wait_for
from .test_dst_nights import AROUND, NIGHTS_2026, QUARTERS_OF_TWO
from .test_notifications_support import RecordingHTTPServer, channel_with_rule

PER_URL = 20  # the web server's JOBS_PING_RATE_PER_URL
BODY_CAP = 1000  # its JOBS_PING_BODY_BYTES
CRON_EVERY_MINUTE = {"type": "cron", "cron": "* * * * *", "timezone": "UTC"}


@pytest.fixture(scope="module")
def ping_web(django_db_setup, django_db_blocker, tmp_path_factory):
    """gunicorn as tests/cli_support.Web runs it, with a small rate and body cap to reach."""
    server = Web(tmp_path_factory.mktemp("ping-web"), JOBS_PING_RATE_PER_URL=str(PER_URL),
                 JOBS_PING_RATE_PER_ADDRESS="0", JOBS_PING_BODY_BYTES=str(BODY_CAP))
    try:
        server.wait_until_up()
        yield server
    finally:
        server.stop()


def checkin_job(name, schedule=CRON_EVERY_MINUTE, saved_ago=timedelta(minutes=10), saved_at=None, **fields):
    """A check-in job saved ``saved_ago``, or at ``saved_at`` (its slots since then are its own to
    account for)."""
    job = save_job(Job(name=name, kind="checkin", target="db1: crontab", **fields), schedule)
    Job.objects.filter(pk=job.pk).update(updated_at=saved_at or job.updated_at - saved_ago)
    job.refresh_from_db()
    return job


def crontab_line(url, *pings, body=None, retry="--retry 5"):
    """Ping ``url`` (plus each of ``pings``: "/start", "", "/fail", "/7"...) from a shell, as a
    crontab line does; what curl printed for each: its HTTP status."""
    script = "\n".join(
        f'curl -sS -m 10 {retry} -o /dev/null -w "%{{http_code}}\\n" {"--data-binary @- " if body else ""}'
        f'"{url}{suffix}"' + (' <<"EOF"\n' + body + "\nEOF" if body else "")
        for suffix in pings)
    done = subprocess.run(["sh"], input=script, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def floor_minute(moment):
    return moment.replace(second=0, microsecond=0)


def slot_of_moment(moment):
    """The slot of an every-minute job that a ping at ``moment`` belongs to (5 s early counts)."""
    return floor_minute(moment + lifecycle.pings.EARLY)


def runs(job):
    """The job's runs once the pings queued by the web are recorded, as the scheduler leader records
    them each tick (the real leader does it in test_a_slot_with_no_ping_fails_and_the_missed_alert_arrives...)."""
    lifecycle.record_queued_pings()
    return list(JobRun.objects.filter(job=job).order_by("scheduled_for"))


def clear_of_a_minute_boundary():
    """Wait, if need be, until the next 10 s hold no minute's slot (nor the 5 s before it that a ping
    counts toward it): pings sent then all belong to the slot of the minute they start in."""
    now = datetime.now(UTC)
    second = now.second + now.microsecond / 1e6
    if second > 45:
        time.sleep(61 - second)


# --- the shell's pings, on the real web server

def test_a_crontab_line_reports_a_start_then_its_success_with_the_duration_and_output(ping_web, transactional_db):
    job = checkin_job("backup")
    url = f"{ping_web.url}/ping/{job.ping_key}"
    before = datetime.now(UTC)
    script = (f'curl -fsS -m 10 --retry 5 "{url}/start" && sleep 1 && '
              f'echo "backup of db1: 42 tables" | curl -fsS -m 10 --retry 5 --data-binary @- "{url}"')
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=120)
    after = datetime.now(UTC)

    assert done.returncode == 0 and done.stdout == "OKOK", done.stderr
    [run] = runs(job)
    assert run.status == RunStatus.SUCCEEDED and run.trigger == RunTrigger.SCHEDULE
    assert run.scheduled_for in {slot_of_moment(before), slot_of_moment(after)}
    assert run.duration >= timedelta(seconds=1)  # the shell slept a second between start and success
    assert run.output == "backup of db1: 42 tables\n"
    job.refresh_from_db()
    assert job.last_run_id == run.pk


def test_a_fail_and_exit_statuses_end_runs_as_the_job_said(ping_web, transactional_db):
    failing, exiting, fine = (checkin_job(name) for name in ("export-fail", "export-exit", "export-zero"))
    assert crontab_line(f"{ping_web.url}/ping/{failing.ping_key}", "/fail") == ["200"]
    assert crontab_line(f"{ping_web.url}/ping/{exiting.ping_key}", "/7") == ["200"]
    assert crontab_line(f"{ping_web.url}/ping/{fine.ping_key}", "/0") == ["200"]

    [failed] = runs(failing)
    assert failed.status == RunStatus.FAILED and "reported a failure" in failed.error
    [exited] = runs(exiting)
    assert exited.status == RunStatus.FAILED and exited.error == "exit status 7"
    assert exited.result == {"exit_status": 7}
    [zero] = runs(fine)
    assert zero.status == RunStatus.SUCCEEDED and zero.result == {"exit_status": 0}

    # HEAD (curl -I) pings like GET.
    headed = checkin_job("export-head")
    done = subprocess.run(["sh", "-c", f'curl -fsS -m 10 --retry 5 -I "{ping_web.url}/ping/{headed.ping_key}"'],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("HTTP/1.1 200"), done.stdout + done.stderr
    assert [run.status for run in runs(headed)] == [RunStatus.SUCCEEDED]


def test_bad_pings_get_a_clear_answer_and_record_nothing(ping_web, transactional_db):
    job = checkin_job("nightly-export")
    url = f"{ping_web.url}/ping/{job.ping_key}"
    assert crontab_line(url, "/256", "/999", "/123456789012345678901234567890", "/-1", "/status") == [
        "400", "400", "400", "404", "404"]
    assert crontab_line(f"{ping_web.url}/ping/{uuid.uuid4()}", "", "/start") == ["404", "404"]
    assert crontab_line(f"{ping_web.url}/ping/not-a-uuid", "") == ["404"]
    # A job of another kind has no ping URL, even given a key.
    other = save_job(Job(name="local", kind="callable", target="builtin.noop"), {"type": "manual"})
    Job.objects.filter(pk=other.pk).update(ping_key=uuid.uuid4())
    other.refresh_from_db()
    assert crontab_line(f"{ping_web.url}/ping/{other.ping_key}", "") == ["404"]
    # DELETE is no ping.
    answer = subprocess.run(["curl", "-sS", "-m", "10", "-o", "/dev/null", "-w", "%{http_code}", "-X", "DELETE", url],
                            capture_output=True, text=True, timeout=60)
    assert answer.stdout == "405"
    assert runs(job) == [] and JobRun.objects.filter(job=other).count() == 0


def test_a_body_over_the_cap_is_cut_never_refused(ping_web, transactional_db, settings):
    job = checkin_job("big-log")
    # Past the site's cap on request bodies too; "é" is 2 bytes: the ping's cap cuts one in two, dropped.
    body = "a" + "é" * (settings.REQUEST_BODY_MAX_BYTES // 2 + 1000)
    assert crontab_line(f"{ping_web.url}/ping/{job.ping_key}", "", body=body) == ["200"]
    [run] = runs(job)
    assert run.status == RunStatus.SUCCEEDED
    assert run.output == "a" + "é" * (BODY_CAP // 2 - 1)
    assert run.output_bytes == len(body.encode()) + 1  # the heredoc's newline


def test_a_ping_storm_gets_429_past_the_rate_of_one_ping_url(ping_web, transactional_db):
    job, other = checkin_job("stormy"), checkin_job("calm")
    # (Without --retry: curl would wait as the 429's Retry-After says, and try again.) More than twice the
    # rate: a storm that crosses a window's end may get up to twice the rate through, and got all of PER_URL
    # + 10 through once (CI).
    answers = crontab_line(f"{ping_web.url}/ping/{job.ping_key}", *([""] * (2 * PER_URL + 10)), retry="")
    assert set(answers) == {"200", "429"}
    # Fixed windows of a minute: the storm (well under a minute) spans one window or two.
    assert PER_URL <= answers.count("200") <= 2 * PER_URL
    assert len(runs(job)) == answers.count("200")
    # Another job's ping URL is not held back by it.
    assert crontab_line(f"{ping_web.url}/ping/{other.ping_key}", "") == ["200"]


def test_pinged_more_often_than_the_schedule_and_too_fast_are_sent(ping_web, transactional_db):
    job = checkin_job("hourly-sync", min_duration_seconds=3600)
    channel = channel_with_rule("webhook", {"url": "http://127.0.0.1:9/hook"}, ["too_often", "too_fast"])
    url = f"{ping_web.url}/ping/{job.ping_key}"
    clear_of_a_minute_boundary()  # across one, the third ping would be the next slot's (CI)
    assert crontab_line(url, "/start", "", "") == ["200", "200", "200"]

    first, extra = runs(job)
    assert first.trigger == RunTrigger.SCHEDULE and first.status == RunStatus.SUCCEEDED
    assert extra.trigger == RunTrigger.PING and extra.status == RunStatus.SUCCEEDED
    sent = set(Delivery.objects.filter(channel=channel).values_list("event", "run_id"))
    assert sent == {("too_fast", first.pk), ("too_often", extra.pk)}


# --- a missing ping, through the real scheduler, worker and a local HTTP server

def test_a_slot_with_no_ping_fails_and_the_missed_alert_arrives_then_a_late_ping_counts(
        ping_web, processes, local_http_allowed):
    with RecordingHTTPServer() as hook:
        channel_with_rule("webhook", {"url": f"{hook.url}/hook"}, ["missed"])
        saved_at = datetime.now(UTC) - timedelta(seconds=90)
        job = checkin_job("offsite-copy", saved_at=saved_at, grace_seconds=5)
        # The slots of its schedule since it was saved, whose grace has passed: the test's own arithmetic.
        first_slot = floor_minute(saved_at) + timedelta(minutes=1)
        processes.beat()
        processes.worker()

        wait_for(lambda: any(b["event"] == "missed" for b in hook.json_bodies()), timeout=60,
                 message="the missed alert reaching the local HTTP server")
        missed = JobRun.objects.get(job=job, scheduled_for=first_slot)
        assert missed.status == RunStatus.FAILED and missed.reason == NO_PING and missed.error == NO_PING
        alert = next(b for b in hook.json_bodies() if b["event"] == "missed")
        assert alert["job"]["name"] == "offsite-copy" and alert["run"]["id"] in set(
            JobRun.objects.filter(job=job, reason=NO_PING).values_list("pk", flat=True))
        assert not JobRun.objects.filter(job=job).exclude(status=RunStatus.FAILED).exists()

        # Late: the missed slot's run stays failed; the ping counts for the slot it belongs to now
        # (or, past that one's grace too, as a run of its own), and is not "too often".
        # The web queues it; the real scheduler leader records it within a tick or so.
        assert crontab_line(f"{ping_web.url}/ping/{job.ping_key}", "") == ["200"]
        wait_for(lambda: JobRun.objects.filter(job=job, status=RunStatus.SUCCEEDED).count() == 1, timeout=15,
                 message="the scheduler leader recording the queued ping")
        missed.refresh_from_db()
        assert missed.status == RunStatus.FAILED
        assert not Delivery.objects.filter(job=job, event="too_often").exists()


# --- in this process: the API and files, the rate per address, a DST night

@pytest.mark.django_db
def test_the_api_makes_a_checkin_job_with_its_ping_url_and_refuses_what_cannot_be(people, settings):
    settings.SITE_URL = "https://scheduler.example.com"
    client = people.client(people.owner)
    payload = {"name": "vendor-export", "kind": "checkin", "target": "vendor's nightly export",
               "schedule": {"type": "cron", "cron": "0 3 * * *", "timezone": "Europe/Berlin"},
               "grace_seconds": 1800, "min_duration_seconds": 60}
    made = client.post("/api/jobs/", payload, format="json")
    assert made.status_code == 201, made.json()
    job = Job.objects.get(name="vendor-export")
    assert made.json()["ping_url"] == f"https://scheduler.example.com/ping/{job.ping_key}"
    assert made.json()["grace_seconds"] == 1800 and made.json()["min_duration_seconds"] == 60

    # Read-only: a key given is ignored, the job keeps its own.
    patched = client.patch(f"/api/jobs/{job.pk}/", {"ping_url": "https://evil.example/ping/x"}, format="json")
    assert patched.status_code == 200 and patched.json()["ping_url"] == made.json()["ping_url"]
    for bad, field in (({"grace_seconds": 0}, "grace_seconds"), ({"grace_seconds": "soon"}, "grace_seconds"),
                       ({"grace_seconds": 10**12}, "grace_seconds"), ({"max_retries": 2}, "max_retries"),
                       ({"min_duration_seconds": 0}, "min_duration_seconds")):
        refused = client.post("/api/jobs/", {**payload, "name": "bad", **bad}, format="json")
        assert refused.status_code == 400 and field in refused.json(), (bad, refused.json())
    assert not Job.objects.filter(name="bad").exists()

    # The service never runs it: run now and backfill are refused, and nothing is queued.
    assert client.post(f"/api/jobs/{job.pk}/run/").status_code == 409
    backfill = client.post(f"/api/jobs/{job.pk}/backfill/", {"start": "2026-01-01T00:00:00Z",
                                                               "end": "2026-01-02T00:00:00Z"}, format="json")
    assert backfill.status_code == 409
    assert not JobRun.objects.filter(job=job).exists()
    # Another user sees nothing of it, its ping URL included.
    assert people.client(people.outsider).get(f"/api/jobs/{job.pk}/").status_code == 404
    # Nor can a workflow run it as a step.
    step = client.post("/api/workflows/", {"name": "after-export", "nodes": ["vendor-export"], "edges": []},
                       format="json")
    assert step.status_code == 400 and "runs elsewhere" in str(step.json()["nodes"]), step.json()


@pytest.mark.django_db
def test_a_jobs_file_declares_a_checkin_job(tmp_path):
    path = tmp_path / "jobs.yml"
    path.write_text("jobs:\n  - name: k8s-report\n    kind: checkin\n    target: the report CronJob\n"
                    "    grace_seconds: 600\n    min_duration_seconds: 30\n"
                    "    schedule: {type: cron, cron: '15 4 * * *', timezone: UTC}\n")
    call_command("jobs", "apply", str(path), stdout=StringIO())
    job = Job.objects.get(name="k8s-report")
    assert (job.kind, job.grace_seconds, job.min_duration_seconds) == ("checkin", 600, 30)
    assert job.ping_key is not None


@pytest.mark.django_db
def test_one_address_pinging_many_urls_is_held_back_too(redis_client):
    jobs = [checkin_job(f"fleet-{n}") for n in range(4)]
    client = Client(REMOTE_ADDR="203.0.113.9")
    with override_settings(JOBS_PING_RATE_PER_URL=0, JOBS_PING_RATE_PER_ADDRESS=6):
        answers = [client.get(f"/ping/{job.ping_key}").status_code for job in jobs for _ in range(5)]
        assert answers.count(200) >= 6 and 429 in answers
        # Another address is not held back by this one's.
        assert Client(REMOTE_ADDR="198.51.100.7").get(f"/ping/{jobs[0].ping_key}").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("policy", [("shift", "both"), ("skip", "second")])
def test_a_checkin_through_the_dst_nights_expects_the_policys_slots(policy):
    for night, change in NIGHTS_2026.items():
        with time_machine.travel(change - AROUND, tick=False):
            job = save_job(Job(name=f"night-{night}", kind="checkin", target="box", grace_seconds=300,
                               dst_skipped=policy[0], dst_repeated=policy[1]),
                           {"type": "cron", "cron": QUARTERS_OF_TWO, "timezone": "Europe/Berlin"})
        expected = dst_oracle.policy_slots_between(QUARTERS_OF_TWO, "Europe/Berlin", change - AROUND,
                                                   change + AROUND, *policy)
        # The scheduler ticks through the night: it makes no run and publishes nothing for a check-in.
        now = change - AROUND + timedelta(seconds=3)
        while now < change + AROUND:
            report = dispatch.dispatch_due(now=now)
            assert report.runs_created == report.runs_ahead == report.runs_waiting == report.slots_skipped == 0
            now += timedelta(minutes=5)
        assert not JobRun.objects.filter(job=job).exists()

        # The first slot is pinged on time (a second after it); the others get none.
        if expected:
            run = lifecycle.record_ping(job.pk, lifecycle.Ping(lifecycle.pings.SUCCESS),
                                        now=expected[0] + timedelta(seconds=1))
            assert run.scheduled_for == expected[0] and run.status == RunStatus.SUCCEEDED
        lifecycle.fail_unpinged(kinds.running_elsewhere(), now=change + AROUND + timedelta(seconds=300))
        failed = list(JobRun.objects.filter(job=job, reason=NO_PING).order_by("scheduled_for")
                      .values_list("scheduled_for", flat=True))
        assert failed == expected[1:], (night, policy)
        Job.objects.filter(pk=job.pk).update(enabled=False)  # its later slots are not this test's


@pytest.mark.django_db
def test_pages_why_and_the_slot_check_treat_a_checkin_as_a_job(people, client):
    now = datetime.now(UTC)
    with time_machine.travel(now - timedelta(minutes=30), tick=False):  # made half an hour ago
        job = checkin_job("ci-nightly", grace_seconds=600, saved_ago=timedelta(0), owner=people.owner)
    waiting = floor_minute(now - timedelta(minutes=2))  # within its grace, no ping yet
    lifecycle.fail_unpinged(kinds.running_elsewhere(), now=now)
    missed = floor_minute(now - timedelta(minutes=15))  # past its grace: failed by the line above

    client.force_login(people.owner)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert f"/ping/{job.ping_key}" in page and 'id="run-now"' not in page and "Backfill" not in page
    why = people.client(people.owner).get(f"/api/jobs/{job.pk}/why/", {"at": waiting.isoformat()}).json()
    assert "waiting for its ping" in str(why), why
    why = people.client(people.owner).get(f"/api/jobs/{job.pk}/why/", {"at": missed.isoformat()}).json()
    assert why["explanation"].startswith("No ping:") and NO_PING in why["explanation"], why
    # The periodic slot check sees every slot accounted for: nothing missing, no alert.
    from jobs.operations import slot_report

    assert slot_report.check_recent(now=now, window=3600)["missing"] == 0


@pytest.mark.django_db
def test_failed_pings_pause_the_job_after_failures_in_a_row(people):
    job = checkin_job("flaky-export", pause_after_failures=2, saved_ago=timedelta(0))
    for _ in range(2):
        lifecycle.record_ping(job.pk, lifecycle.Ping(lifecycle.pings.FAIL))
    job.refresh_from_db()
    assert not job.enabled and "2" in job.paused_reason


@pytest.mark.django_db
def test_a_start_with_no_end_times_out_and_a_clone_gets_a_ping_url_of_its_own(people):
    from jobs.actions.jobs import Actor, clone
    from jobs.scheduling import monitor

    job = checkin_job("long-backup", saved_ago=timedelta(0))
    Job.objects.filter(pk=job.pk).update(timeout_seconds=60)
    job.refresh_from_db()
    run = lifecycle.record_ping(job.pk, lifecycle.Ping(lifecycle.pings.START))
    assert run.status == RunStatus.RUNNING
    assert monitor.mark_overdue(run.started_at + timedelta(seconds=3600)) == 1
    run.refresh_from_db()
    assert run.status == RunStatus.TIMED_OUT

    copy = clone(Actor.command_line(), job)
    assert copy.ping_key is not None and copy.ping_key != job.ping_key


@pytest.mark.django_db
def test_any_job_that_succeeds_sooner_than_its_shortest_run_sends_too_fast(people):
    job = save_job(Job(name="etl", kind="callable", target="builtin.noop", min_duration_seconds=60), {"type": "manual"})
    channel = channel_with_rule("webhook", {"url": "http://127.0.0.1:9/hook"}, ["too_fast"])
    run = lifecycle.create_run(job)
    assert lifecycle.claim(run.pk, 1, "w1@host", 4321) is not None
    assert lifecycle.record_success(run.pk, 1, output="done")
    assert list(Delivery.objects.filter(channel=channel).values_list("event", "run_id")) == [("too_fast", run.pk)]
    # Without a shortest run, a success is no news to that rule.
    Job.objects.filter(pk=job.pk).update(min_duration_seconds=None)
    again = lifecycle.create_run(Job.objects.get(pk=job.pk))
    assert lifecycle.claim(again.pk, 1, "w1@host", 4321) is not None
    assert lifecycle.record_success(again.pk, 1, output="done")
    assert Delivery.objects.filter(channel=channel).count() == 1


@pytest.mark.django_db
def test_the_slots_of_a_paused_checkin_are_not_missed_once_it_is_resumed():
    from jobs.definitions import jobs as definitions

    now = datetime.now(UTC).replace(second=30, microsecond=0)
    with time_machine.travel(now - timedelta(minutes=30), tick=False):
        job = checkin_job("weekly-vendor-feed", grace_seconds=60, saved_ago=timedelta(0))
    with time_machine.travel(now - timedelta(minutes=20), tick=False):
        lifecycle.fail_unpinged(kinds.running_elsewhere(), now=now - timedelta(minutes=20))
        definitions.pause(job)
    with time_machine.travel(now, tick=False):
        definitions.resume(Job.objects.get(pk=job.pk))
    later = now + timedelta(minutes=5)
    lifecycle.fail_unpinged(kinds.running_elsewhere(), now=later)

    failed = set(JobRun.objects.filter(job=job, reason=NO_PING).values_list("scheduled_for", flat=True))
    # Made at :30 past a minute: its slots are the minutes after; a slot is missed a minute (its grace) after it.
    before_pause = {floor_minute(now - timedelta(minutes=30)) + timedelta(minutes=n) for n in range(1, 10)}
    after_resume = {floor_minute(now) + timedelta(minutes=n) for n in range(1, 5)}
    assert failed == before_pause | after_resume
    # A pass with nothing past its grace reads no job of it again.
    assert lifecycle.fail_unpinged(kinds.running_elsewhere(), now=later) == 0


@pytest.mark.django_db
def test_the_on_time_report_counts_a_checkins_pings_and_missed_slots():
    from jobs.operations import reports

    now = datetime.now(UTC).replace(minute=30, second=0, microsecond=0)
    made = now - timedelta(hours=10)
    with time_machine.travel(made, tick=False):
        job = save_job(Job(name="hourly-etl", kind="checkin", target="etl box", grace_seconds=600),
                       {"type": "cron", "cron": "0 * * * *", "timezone": "UTC"})
    slots = [floor_minute(made).replace(minute=0) + timedelta(hours=h) for h in range(1, 11)]  # ten hours
    on_time, late_start, missing = slots[:6], slots[6:8], slots[8:]
    for slot in on_time:  # started 5 s after the slot, done 90 s later
        lifecycle.record_ping(job.pk, lifecycle.Ping(lifecycle.pings.START), now=slot + timedelta(seconds=5))
        lifecycle.record_ping(job.pk, lifecycle.Ping(lifecycle.pings.SUCCESS), now=slot + timedelta(seconds=95))
    for slot in late_start:  # only its end reported, 5 minutes late: within the grace, not on time
        lifecycle.record_ping(job.pk, lifecycle.Ping(lifecycle.pings.FAIL), now=slot + timedelta(minutes=5))
    lifecycle.fail_unpinged(kinds.running_elsewhere(), now=now)
    lifecycle.recount_ends()

    # Two days: the ten hours cross midnight when the test runs before 10:30 UTC (one day is today's).
    report = reports.job_report(job, 2, now=now)
    assert report["slots_expected"] == report["slots_with_run"] == len(slots)
    assert report["missed"] == 0  # every slot has its run: the missing ones failed for want of a ping
    assert report["started_on_time"] == len(on_time)
    assert report["outcomes"]["failed"] == len(late_start) + len(missing)
    assert report["outcomes"]["succeeded"] == len(on_time)
    assert report["duration"]["runs"] == len(on_time)
    assert 90 / 2 ** 0.125 <= report["duration"]["p50_seconds"] <= 90 * 2 ** 0.125


def test_jobsctl_shows_a_checkins_ping_url_and_will_not_run_it(jobsctl):
    from django.contrib.auth.models import User

    from jobs.access import tokens as api_tokens

    owner = User.objects.create_user("cron-owner")
    token = api_tokens.create(owner)[1]
    job = checkin_job("nas-backup", grace_seconds=900, min_duration_seconds=30, owner=owner)

    shown = jobsctl("show", "nas-backup", token=token)
    assert shown.returncode == 0, shown.stderr
    assert job.ping_url in shown.stdout and "900" in shown.stdout and "min_duration_seconds" in shown.stdout
    assert "nas-backup" in jobsctl("list", "--kind", "checkin", token=token).stdout
    refused = jobsctl("run", "nas-backup", token=token)
    assert refused.returncode != 0 and "runs elsewhere" in refused.stderr
    assert not JobRun.objects.filter(job=job).exists()
