"""Auto-pause: a job with ``pause_after_failures`` N pauses itself when N runs in a row end failed,
timed out or lost, says why (its page, the API, the audit trail) and tells the rules of the
``paused`` event; a success ends the streak, a skipped or cancelled run leaves it as it is, and
resuming clears it."""

import threading

import pytest
from django.db import connection
from django.utils import timezone

from audit.models import Action, AuditEntry, Source
from jobs import lifecycle
from jobs.actions import jobs as actions
from jobs.models import Job, RunStatus
from notifications.models import Delivery, Event
from notifications.render import context_for, headline
from notifications.sending import send_delivery

from .api_personas import browser, make_personas
from .conftest import wait_for
from .test_notifications_support import RecordingHTTPServer, RecordingSMTPServer, channel_with_rule, make_job


def fail_a_run(job, error="boom", **how):
    """A run of ``job`` that is claimed and ends in failure (``how``: timed_out or lost), as a worker
    would record it."""
    run = lifecycle.create_run(job)
    assert lifecycle.claim(run.pk, run.attempt, "w1@host", 4321) is not None
    lifecycle.record_failure(run.pk, run.attempt, error, **how)
    run.refresh_from_db()
    return run


def succeed_a_run(job):
    run = lifecycle.create_run(job)
    assert lifecycle.claim(run.pk, run.attempt, "w1@host", 4321) is not None
    assert lifecycle.record_success(run.pk, run.attempt, "ok", 2)
    return run


def state(job):
    job.refresh_from_db()
    return job.enabled, job.consecutive_failures


def personas_with_a_job_pausing_after(failures):
    """The personas of tests/api_personas.py, their job pausing itself after ``failures`` in a row."""
    people = make_personas()
    Job.objects.filter(pk=people.job.pk).update(pause_after_failures=failures)
    people.job.refresh_from_db()
    return people


# --- the streak, through the lifecycle (both databases)


@pytest.mark.django_db(transaction=True)
def test_it_pauses_when_the_third_failure_in_a_row_ends(redis_client):
    job = make_job(pause_after_failures=3, max_lost_attempts=0)
    first, second = fail_a_run(job), fail_a_run(job, timed_out=True)
    assert state(job) == (True, 2)

    third = fail_a_run(job, lost=True)

    assert (first.status, second.status, third.status) == (RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST)
    assert state(job) == (False, 3)
    for run in (first, second, third):
        assert f"#{run.pk} ({run.status})" in job.paused_reason
    assert "3 runs in a row" in job.paused_reason
    entry = AuditEntry.objects.get(job=job)
    assert (entry.action, entry.source, entry.actor_id, entry.actor_name, entry.run_id) == (
        Action.PAUSE, Source.SYSTEM, None, "auto-pause", third.pk)
    assert sorted(entry.changes["failing_runs"][1]) == sorted([first.pk, second.pk, third.pk])
    assert entry.changes["enabled"] == [True, False]


@pytest.mark.django_db(transaction=True)
def test_a_success_ends_the_streak(redis_client):
    job = make_job(pause_after_failures=3)
    fail_a_run(job)
    fail_a_run(job)
    succeed_a_run(job)  # on PostgreSQL the single-statement success, which resets the streak in SQL
    assert state(job) == (True, 0)
    fail_a_run(job)
    fail_a_run(job)
    assert state(job) == (True, 2)
    fail_a_run(job)
    assert state(job) == (False, 3)


@pytest.mark.django_db(transaction=True)
def test_skipped_and_cancelled_runs_leave_the_streak_as_it_is(redis_client):
    job = make_job(pause_after_failures=3)
    fail_a_run(job)
    cancelled = lifecycle.create_run(job)
    assert lifecycle.cancel(cancelled, reason="by a test")
    fail_a_run(job)
    skipped = lifecycle.create_runs([(job, timezone.now(), RunStatus.SKIPPED, "skipped: overlap", None)],
                                    timezone.now())
    assert [status for _, _, status, _ in skipped] == [RunStatus.SKIPPED]
    assert state(job) == (True, 2)
    fail_a_run(job)
    assert state(job) == (False, 3)


@pytest.mark.django_db(transaction=True)
def test_a_retried_attempt_is_not_a_run_that_failed(redis_client):
    job = make_job(pause_after_failures=1, max_retries=1, retry_backoff_seconds=0, retry_jitter=False)
    run = lifecycle.create_run(job)
    lifecycle.claim(run.pk, 1, "w1@host", 4321)
    assert lifecycle.record_failure(run.pk, 1, "first attempt") == RunStatus.RETRYING
    assert state(job) == (True, 0)
    lifecycle.queue_due_retries()
    lifecycle.claim(run.pk, 2, "w1@host", 4321)
    assert lifecycle.record_failure(run.pk, 2, "second attempt") == RunStatus.FAILED
    assert state(job) == (False, 1)


@pytest.mark.django_db(transaction=True)
def test_without_the_setting_it_counts_but_never_pauses(redis_client):
    job = make_job(pause_after_failures=None)
    for _ in range(4):
        fail_a_run(job)
    assert state(job) == (True, 4)
    job.pause_after_failures = 0
    job.save()
    fail_a_run(job)
    assert state(job) == (True, 5)
    assert not AuditEntry.objects.filter(job=job).exists()


@pytest.mark.django_db(transaction=True)
def test_a_job_paused_by_a_person_is_not_paused_again(redis_client):
    job = make_job(pause_after_failures=2)
    actions.pause(actions.Actor.command_line(), job)
    fail_a_run(job)
    fail_a_run(job)  # manual runs of a paused job still run, and still count
    job.refresh_from_db()
    assert (job.enabled, job.consecutive_failures, job.paused_reason) == (False, 2, "")
    assert list(AuditEntry.objects.filter(job=job).values_list("source", flat=True)) == [Source.CLI]


# --- the paused event


@pytest.mark.django_db(transaction=True)
def test_the_paused_event_goes_to_the_rules_that_take_it_once(redis_client):
    job = make_job(pause_after_failures=2, tags=["reports"])
    takes_it = channel_with_rule("webhook", {"url": "http://127.0.0.1:9/hook"}, ["paused"], name="ops",
                                 scope="tag", tag="reports")
    channel_with_rule("webhook", {"url": "http://127.0.0.1:9/other"}, ["failed"], name="failures-only")
    fail_a_run(job)
    last = fail_a_run(job)
    fail_a_run(job)  # a manual run of the paused job: no second pause, no second event

    paused = Delivery.objects.get(event=Event.PAUSED)
    assert (paused.channel, paused.job_id, paused.run_id, paused.status) == (takes_it, job.pk, last.pk, "pending")
    assert paused.payload["details"]["failures"] == 2
    assert headline(paused.payload) == "nightly-report was paused: 2 runs in a row ended in failure"
    assert context_for(paused)["reason"] == Job.objects.get(pk=job.pk).paused_reason


@pytest.mark.django_db(transaction=True)
def test_every_channel_kind_says_why_the_job_paused(redis_client, local_http_allowed):
    job = make_job(pause_after_failures=1)
    with RecordingHTTPServer() as hook, RecordingSMTPServer() as smtp:
        channel_with_rule("webhook", {"url": f"{hook.url}/hook"}, ["paused"], name="hook")
        channel_with_rule("slack", {"url": f"{hook.url}/slack"}, ["paused"], name="slack")
        channel_with_rule("email", {"recipients": ["ops@example.com"]}, ["paused"], name="mail")
        run = fail_a_run(job, error="the database refused")
        for delivery in Delivery.objects.filter(event=Event.PAUSED):
            send_delivery(delivery.pk)
        reason = Job.objects.get(pk=job.pk).paused_reason
        bodies = {r["path"]: r["body"].decode() for r in hook.requests}
        messages = [m["subject"] + m["text"] + m["html"] for m in smtp.messages]

    assert set(Delivery.objects.filter(event=Event.PAUSED).values_list("status", flat=True)) == {"sent"}
    assert f"#{run.pk}" in reason
    webhook = hook.json_bodies()[[r["path"] for r in hook.requests].index("/hook")]
    assert (webhook["event"], webhook["paused"]["failures"], webhook["paused"]["reason"]) == ("paused", 1, reason)
    assert "was paused: 1 runs in a row ended in failure" in bodies["/slack"]
    assert f"#{run.pk}" in bodies["/slack"]
    assert len(messages) == 1 and "was paused" in messages[0] and f"#{run.pk}" in messages[0]


# --- resuming, and what the API and the pages say


@pytest.mark.django_db(transaction=True)
def test_the_api_shows_why_and_resuming_clears_it(redis_client):
    people = personas_with_a_job_pausing_after(2)
    job = people.job
    fail_a_run(job)
    fail_a_run(job)
    api = people.client(people.owner)

    shown = api.get(f"/api/jobs/{job.pk}/").json()
    assert (shown["enabled"], shown["pause_after_failures"], shown["consecutive_failures"]) == (False, 2, 2)
    assert shown["paused_reason"].startswith("Paused by the service after 2 runs in a row")
    page = browser(people.owner).get(f"/jobs/{job.pk}/").content.decode()
    assert "Why it is paused" in page and "2 runs in a row ended in failure" in page

    # What the service keeps is not the API's to write.
    api.patch(f"/api/jobs/{job.pk}/", {"paused_reason": "", "consecutive_failures": 0}, format="json")
    assert state(job) == (False, 2)

    resumed = api.post(f"/api/jobs/{job.pk}/resume/").json()
    assert (resumed["enabled"], resumed["consecutive_failures"], resumed["paused_reason"]) == (True, 0, "")
    assert "Why it is paused" not in browser(people.owner).get(f"/jobs/{job.pk}/").content.decode()
    fail_a_run(job)
    assert state(job) == (True, 1)  # counted afresh from the resume


@pytest.mark.django_db(transaction=True)
def test_resuming_from_the_pages_and_by_enabling_clears_it_too(redis_client):
    people = personas_with_a_job_pausing_after(1)
    job = people.job
    fail_a_run(job)
    assert state(job) == (False, 1)
    browser(people.owner).post(f"/jobs/{job.pk}/resume/")
    job.refresh_from_db()
    assert (job.enabled, job.consecutive_failures, job.paused_reason) == (True, 0, "")

    fail_a_run(job)
    assert state(job) == (False, 1)
    api = people.client(people.owner)
    assert api.patch(f"/api/jobs/{job.pk}/", {"enabled": True}, format="json").status_code == 200
    job.refresh_from_db()
    assert (job.enabled, job.consecutive_failures, job.paused_reason) == (True, 0, "")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("value, rule", [(-1, "greater than or equal to 0"), (1001, "less than or equal to 1000"),
                                         ("three", "valid integer"), (10**12, "less than or equal to 1000"),
                                         ("1; DROP TABLE jobs_job", "valid integer")])
def test_a_bad_setting_is_a_400_naming_it(redis_client, value, rule):
    people = make_personas()
    api = people.client(people.owner)
    answer = api.patch(f"/api/jobs/{people.job.pk}/", {"pause_after_failures": value}, format="json")
    assert answer.status_code == 400
    assert rule in " ".join(answer.json()["pause_after_failures"])
    assert Job.objects.get(pk=people.job.pk).pause_after_failures is None


@pytest.mark.django_db(transaction=True)
def test_an_edit_keeps_the_streak_the_runs_made_meanwhile(redis_client):
    people = make_personas()
    job = people.job
    stale = Job.objects.get(pk=job.pk)  # read before the runs end, as a form would have
    fail_a_run(job)
    fail_a_run(job)
    actions.edit(actions.Actor.command_line(), stale, {"pause_after_failures": 3})
    assert state(job) == (True, 2)
    fail_a_run(job)
    assert state(job) == (False, 3)


# --- two runs that end at once (PostgreSQL's row locks)


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres("concurrent transactions; SQLite has one writer at a time")
@pytest.mark.timeout(60)
def test_runs_ending_at_once_are_each_counted_and_pause_the_job_once(redis_client):
    ends = 8
    job = make_job(pause_after_failures=ends)
    channel_with_rule("webhook", {"url": "http://127.0.0.1:9/hook"}, ["paused"])
    runs = [lifecycle.create_run(job) for _ in range(ends)]
    for run in runs:
        lifecycle.claim(run.pk, 1, "w1@host", 4321)
    together, errors = threading.Barrier(ends), []

    def end(run):
        try:
            together.wait(timeout=20)
            lifecycle.record_failure(run.pk, 1, "boom")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=end, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert errors == []
    assert state(job) == (False, ends)
    assert AuditEntry.objects.filter(job=job, source=Source.SYSTEM).count() == 1
    assert Delivery.objects.filter(event=Event.PAUSED).count() == 1


# --- end to end, with a real worker


def finished(run):
    run.refresh_from_db()
    return run.is_terminal


@pytest.mark.timeout(120)
def test_a_failing_job_pauses_itself_on_a_real_worker_and_says_so(processes, tmp_path, local_http_allowed):
    marker = tmp_path / "broken"
    marker.touch()
    job = make_job("fails-until-fixed", target="test.fail_while", kwargs={"marker": str(marker)},
                   pause_after_failures=3)
    processes.worker()
    with RecordingHTTPServer() as hook:
        channel_with_rule("webhook", {"url": f"{hook.url}/hook"}, ["paused"])
        runs = []
        for number in range(1, 4):
            run = lifecycle.create_run(job)
            wait_for(lambda run=run: finished(run), timeout=30, message=f"run {number} to end")
            runs.append(run)
            assert (run.status, state(job)) == (RunStatus.FAILED, (number < 3, number))
        wait_for(lambda: any(b["event"] == "paused" for b in hook.json_bodies()), timeout=30,
                 message="the paused notification to be sent by the worker")

    job.refresh_from_db()
    assert all(f"#{run.pk} (failed)" in job.paused_reason for run in runs)
    entry = AuditEntry.objects.get(job=job, action=Action.PAUSE)
    assert (entry.source, entry.run_id) == (Source.SYSTEM, runs[-1].pk)
    delivery = Delivery.objects.get(event=Event.PAUSED)
    assert (delivery.run_id, delivery.status) == (runs[-1].pk, "sent")

    # Fixed, and resumed: the count starts again, and a success in between keeps it from pausing.
    actions.resume(actions.Actor.command_line(), job)
    assert state(job) == (True, 0)
    run = lifecycle.create_run(job)
    wait_for(lambda: finished(run), timeout=30, message="a run after the resume")
    assert state(job) == (True, 1)
    marker.unlink()
    run = lifecycle.create_run(job)
    wait_for(lambda: finished(run), timeout=30, message="a run after the fix")
    assert (run.status, state(job)) == (RunStatus.SUCCEEDED, (True, 0))


# --- the setting from a jobs file, the job form, and jobsctl


@pytest.mark.django_db(transaction=True)
def test_a_jobs_file_sets_it_and_an_apply_keeps_the_streak(redis_client, tmp_path):
    from io import StringIO

    from django.core.management import call_command

    def jobs(*args):
        out = StringIO()
        call_command("jobs", *args, stdout=out)
        return out.getvalue()

    path = tmp_path / "jobs.yaml"
    path.write_text("jobs:\n- name: nightly\n  kind: callable\n  target: builtin.fail\n"
                    "  schedule: {type: manual}\n  pause_after_failures: 2\n")
    jobs("apply", str(path))
    job = Job.objects.get(name="nightly")
    assert job.pause_after_failures == 2
    fail_a_run(job)
    path.write_text(path.read_text().replace("pause_after_failures: 2", "pause_after_failures: 3"))
    jobs("apply", str(path))
    assert state(job) == (True, 1)  # the file changed the setting, not what the runs counted
    exported = tmp_path / "out.yaml"
    jobs("export", str(exported))
    assert "pause_after_failures: 3" in exported.read_text()
    assert "consecutive_failures" not in exported.read_text() and "paused_reason" not in exported.read_text()


@pytest.mark.django_db(transaction=True)
def test_the_job_form_sets_it(redis_client):
    people = make_personas()
    page = browser(people.owner).get(f"/jobs/{people.job.pk}/edit/").content.decode()
    assert 'name="pause_after_failures"' in page


@pytest.mark.timeout(300)
def test_jobsctl_shows_why_and_resumes(jobsctl, redis_client):
    from django.contrib.auth.models import User

    from jobs.access import tokens as api_tokens

    owner = User.objects.create_user("owner")
    token = api_tokens.create(owner)[1]
    job = make_job("nightly", owner=owner, pause_after_failures=1)
    run = fail_a_run(job)

    shown = jobsctl("show", "nightly", token=token).stdout
    assert "paused_reason" in shown and f"#{run.pk} (failed)" in shown
    assert [line.split() for line in shown.splitlines() if line.startswith("consecutive_failures")] == [
        ["consecutive_failures", "1"]]
    assert jobsctl("resume", "nightly", token=token).returncode == 0
    job.refresh_from_db()
    assert (job.enabled, job.consecutive_failures, job.paused_reason) == (True, 0, "")
    assert "paused_reason" not in jobsctl("show", "nightly", token=token).stdout
