"""The queue of check-in pings (jobs.lifecycle.ping_queue) and their recording in batches
(jobs.lifecycle.ping_batches): a batch records what each ping recorded alone by ``record_ping`` would;
each queued ping is recorded once, though the leader dies between recording and trimming, or Redis
loses the queue's numbering; a full queue, or one out of reach, answers 503 and loses nothing taken.

The expected records come from the same pings recorded one at a time on twin jobs, and from the
test's own ledger of what it pushed.
"""

import io
import random
import socket
import wsgiref.util
from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from django.test import override_settings
from prometheus_client.parser import text_string_to_metric_families

from jobs import lifecycle
from jobs.api import pings as ping_api
from jobs.definitions.jobs import save_job
from jobs.lifecycle import ping_batches, ping_queue
from jobs.lifecycle.pings import FAIL, START, SUCCESS, Ping
from jobs.models import Job, JobAttempt, JobRun, PingQueueMark, RunEnd
from notifications.models import Delivery

from .test_notifications_support import channel_with_rule

pytestmark = pytest.mark.postgres

EVERY_MINUTE = {"type": "cron", "cron": "* * * * *", "timezone": "UTC"}
EVERY_FIVE = {"type": "cron", "cron": "*/5 * * * *", "timezone": "UTC"}
AT_THREE = {"type": "cron", "cron": "0 3 * * *", "timezone": "UTC"}  # no slot among the pings: runs of their own
SHAPES = [(EVERY_MINUTE, {}), (EVERY_FIVE, {}), (AT_THREE, {}), (EVERY_MINUTE, {"min_duration_seconds": 30}),
          (EVERY_MINUTE, {"tags": ["watched"]}), (EVERY_FIVE, {"pause_after_failures": 2})]


def twins(count, saved_at):
    """``count`` pairs of check-in jobs alike but for their names, each pair of one shape of SHAPES."""
    pairs = []
    for n in range(count):
        schedule, fields = SHAPES[n % len(SHAPES)]
        pair = [save_job(Job(name=f"{side}-{n}", kind="checkin", target="a crontab", grace_seconds=3600, **fields),
                         schedule) for side in ("alone", "batch")]
        Job.objects.filter(pk__in=[job.pk for job in pair]).update(updated_at=saved_at)
        pairs.append(pair)
    return pairs


def random_pings(rng, pairs, start, count):
    """(pair index, Ping, moment): a ledger of pings to ``pairs`` pairs of jobs, some pinged many times
    within a minute."""
    kinds = [(START, None), (SUCCESS, None), (SUCCESS, 0), (FAIL, None), (FAIL, 7), (SUCCESS, None)]
    moment, ledger = start, []
    for _ in range(count):
        moment += timedelta(seconds=rng.choice([0.2, 1, 7, 30, 65]))
        kind, status = rng.choice(kinds)
        body = rng.choice(["", "", "db1: 42 tables\n", "ünïcode ✓"])
        ledger.append((rng.randrange(pairs), Ping(kind, status, body, len(body.encode()), "192.0.2.7"), moment))
    return ledger


def three_oclock_between(start, end):
    """Whether AT_THREE has a slot from ``start`` to ``end``."""
    three = start.replace(hour=3, minute=0, second=0, microsecond=0)
    return any(start <= slot <= end for slot in (three, three + timedelta(days=1)))


def shown(job):
    """What a user sees of a job's records, by run (its order), without ids or names."""
    runs = list(JobRun.objects.filter(job=job).order_by("scheduled_for", "pk"))
    index = {run.pk: n for n, run in enumerate(runs)}
    job.refresh_from_db()
    return {
        "runs": [(r.scheduled_for, r.trigger, r.status, r.started_at, r.finished_at, r.created_at, r.output,
                  r.output_bytes, r.result, r.error, r.reason, r.attempt) for r in runs],
        "attempts": sorted((index[a.run_id], a.number, a.outcome, a.started_at, a.finished_at, a.worker, a.error)
                           for a in JobAttempt.objects.filter(run__job=job)),
        "ends": sorted((index[e.run_id], e.status, e.ended_at, e.seconds) for e in RunEnd.objects.filter(job_id=job.pk)),
        "sent": sorted((d.event, index.get(d.run_id)) for d in Delivery.objects.filter(job=job)),
        "job": (job.consecutive_failures, job.enabled, index.get(job.last_run_id)),
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_batch_records_what_each_ping_recorded_alone_would(transactional_db, monkeypatch, seed):
    rng = random.Random(seed)
    now = datetime.now(UTC).replace(microsecond=0)
    ledger = random_pings(rng, 12, now - timedelta(minutes=20), 150)  # to some 35 minutes after now
    # AT_THREE's jobs get no slot among the pings, so their pings make runs of their own. Run near 03:00
    # UTC (CI at 02:50, 2026-11-30), its slot's run took many of them, and fewer went in batches.
    if three_oclock_between(now - timedelta(minutes=30), ledger[-1][2]):
        now -= timedelta(hours=6)
        ledger = [(n, ping, at - timedelta(hours=6)) for n, ping, at in ledger]
    assert not three_oclock_between(now - timedelta(minutes=30), ledger[-1][2])
    pairs = twins(12, saved_at=now - timedelta(minutes=30))
    # Successes told to someone (a watched job's, a recovery, too fast) and successes nobody hears.
    channel_with_rule("webhook", {"url": "http://127.0.0.1:9/hook"}, ["failed", "too_often", "too_fast", "paused"])
    channel_with_rule("webhook", {"url": "http://127.0.0.1:9/watched"}, ["succeeded", "recovered"], name="watched",
                      scope="tag", tag="watched")
    for n, ping, at in ledger:
        lifecycle.record_ping(pairs[n][0].pk, ping, now=at)
    one_at_a_time = []
    monkeypatch.setattr(lifecycle.pings, "record_ping", spy(lifecycle.pings.record_ping, one_at_a_time))
    for start in range(0, len(ledger), 40):  # in batches, as the queue is drained
        with transaction.atomic():
            ping_batches.record_many([(pairs[n][1].pk, ping, at) for n, ping, at in ledger[start:start + 40]])

    records = [shown(alone) for alone, _ in pairs]
    assert [shown(batch) for _, batch in pairs] == records
    # Not a comparison of nothing: runs of every kind, alerts sent, and most pings recorded together.
    assert {run[2] for record in records for run in record["runs"]} >= {"succeeded", "failed", "running"}
    assert {event for record in records for event, _ in record["sent"]} >= {"failed", "too_often", "succeeded"}
    assert len(one_at_a_time) < len(ledger) / 2


def spy(function, calls):
    def called(*args, **kwargs):
        calls.append(args)
        return function(*args, **kwargs)
    return called


def push(queue, job, count, kind=SUCCESS):
    return [queue.push(job.pk, Ping(kind, None, f"ping {n}", 6, "192.0.2.9"), [], 120, 1_000_000)
            for n in range(count)]


@pytest.fixture
def queue(transactional_db, redis_client):
    found = ping_queue.current()
    assert found is not None, "the pings cache is Redis in these tests"
    found.client.delete(found.key, found.numbering, found.epoch_key)
    yield found
    found.client.delete(found.key, found.numbering, found.epoch_key)


def test_each_queued_ping_is_recorded_once_though_the_leader_dies_before_it_trims(queue, monkeypatch):
    job = save_job(Job(name="nightly", kind="checkin", target="box", grace_seconds=3600), AT_THREE)
    assert push(queue, job, 5) == [1, 2, 3, 4, 5]

    # The leader dies after its transaction commits and before it takes the pings off the queue.
    monkeypatch.setattr(queue, "trim_script", lambda keys, args: (_ for _ in ()).throw(ConnectionError("died")))
    with pytest.raises(ConnectionError):
        lifecycle.record_queued_pings()
    assert JobRun.objects.filter(job=job).count() == 5 and queue.waiting() == 5
    monkeypatch.undo()

    # The next leader finds them recorded (the mark), records none twice, and takes them off.
    push(queue, job, 2)
    drained = lifecycle.record_queued_pings()
    assert (drained.recorded, drained.waiting, queue.waiting()) == (2, False, 0)
    assert sorted(JobRun.objects.filter(job=job).values_list("output", flat=True)) == sorted(
        [f"ping {n}" for n in range(5)] + ["ping 0", "ping 1"])
    assert PingQueueMark.objects.get().recorded == 7

    # Redis lost the queue and its numbering: the new numbering (from 1 again) is recorded, not skipped.
    queue.client.delete(queue.numbering, queue.epoch_key)
    assert push(queue, job, 1) == [1]
    assert lifecycle.record_queued_pings().recorded == 1
    assert JobRun.objects.filter(job=job).count() == 8


def test_a_drain_stops_at_its_budget_and_says_how_far_every_ping_is_recorded(queue):
    jobs = [save_job(Job(name=f"box-{n}", kind="checkin", target="box", grace_seconds=3600), AT_THREE)
            for n in range(3)]
    before = datetime.now(UTC)
    for job in jobs:
        push(queue, job, 1)
    drained = lifecycle.record_queued_pings(budget_seconds=0, batch=1)
    assert (drained.recorded, drained.waiting) == (1, True)
    # Not past the oldest ping still queued: the missing-ping check looks no further (fail_unpinged).
    assert before - timedelta(seconds=1) <= drained.until <= datetime.now(UTC) + timedelta(seconds=1)
    assert drained.until <= lifecycle.record_queued_pings(budget_seconds=0, batch=1).until
    rest = lifecycle.record_queued_pings()
    assert (rest.recorded, rest.waiting) == (1, False) and JobRun.objects.count() == 3
    assert rest.until >= drained.until


def lane_answer(path, method="GET", body=b""):
    environ = {"PATH_INFO": path, "REQUEST_METHOD": method, "REMOTE_ADDR": "192.0.2.10",
               "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}
    wsgiref.util.setup_testing_defaults(environ)
    answered = {}

    def start_response(status, headers):
        answered.update(status=int(status.split()[0]), headers=dict(headers))

    def django(environ, start_response):
        start_response("200 OK", [])
        return [b"django"]

    content = b"".join(ping_api.lane(django)(environ, start_response))
    return answered["status"], answered["headers"], content


def test_a_full_queue_or_one_out_of_reach_answers_503_and_keeps_what_it_took(queue):
    job = save_job(Job(name="backup", kind="checkin", target="box", grace_seconds=3600), AT_THREE)
    with override_settings(JOBS_PING_QUEUE_MAX=2):
        answers = [lane_answer(f"/ping/{job.ping_key}")[0] for _ in range(3)]
        status, headers, content = lane_answer(f"/ping/{job.ping_key}")
    assert answers == [200, 200, 503] and status == 503 and headers["Retry-After"] == str(ping_api.RETRY_SECONDS)
    assert b"try again" in content
    assert lane_answer("/jobs/")[2] == b"django"  # anything else is Django's
    assert lifecycle.record_queued_pings().recorded == 2 and JobRun.objects.filter(job=job).count() == 2

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    unreachable = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
                   "pings": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                             "LOCATION": f"redis://127.0.0.1:{port}/0", "KEY_PREFIX": "pings"}}
    with override_settings(CACHES=unreachable):
        status, headers, _ = lane_answer(f"/ping/{job.ping_key}")
        drained = lifecycle.record_queued_pings()
    assert status == 503 and "Retry-After" in headers
    # Nothing is known of the queue: the missing-ping check fails no slot meanwhile.
    assert drained.until == ping_queue.NOTHING_KNOWN and drained.recorded == 0
    assert JobRun.objects.filter(job=job).count() == 2


def test_the_lane_answers_as_the_view_does_for_each_bad_ping(queue):
    job = save_job(Job(name="sync", kind="checkin", target="box", grace_seconds=3600), AT_THREE)
    cases = {f"/ping/{job.ping_key}/256": 400, f"/ping/{job.ping_key}/nope": 404, "/ping/not-a-uuid": 404,
             "/ping/00000000-0000-0000-0000-000000000000": 404, f"/ping/{job.ping_key}/start/extra": 404,
             "/ping/somekey/no such job": 404, "/ping/": 404}
    assert {path: lane_answer(path)[0] for path in cases} == cases
    status, headers, content = lane_answer(f"/ping/{job.ping_key}", method="DELETE")
    assert (status, headers["Allow"], content) == (405, "GET, POST, HEAD", b"Use GET, POST or HEAD.\n")
    assert headers["Content-Length"] == str(len(content)) and headers["Content-Type"] == "text/plain"
    status, _, content = lane_answer(f"/ping/{job.ping_key}", method="HEAD")
    assert (status, content) == (200, b"")
    # A body over the cap is cut, never refused; injection-shaped bodies are kept as text.
    huge = b"'; DROP TABLE jobs_job; --\n" + b"x" * 50_000
    with override_settings(JOBS_PING_BODY_BYTES=100):
        assert lane_answer(f"/ping/{job.ping_key}/fail", method="POST", body=huge)[0] == 200
    assert lifecycle.record_queued_pings().recorded == 2
    failed = JobRun.objects.get(job=job, status="failed")
    assert failed.output == huge[:100].decode() and failed.output_bytes == len(huge)
    assert Job.objects.filter(pk=job.pk).exists()


def test_the_metrics_show_the_pings_waiting_to_be_recorded(queue, client, settings):
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_IPS = "", ["127.0.0.1"]
    job = save_job(Job(name="export", kind="checkin", target="vendor", grace_seconds=3600), AT_THREE)
    push(queue, job, 3)
    assert waiting_in_metrics(client) == 3
    lifecycle.record_queued_pings()
    assert waiting_in_metrics(client) == 0


def waiting_in_metrics(client):
    response = client.get("/metrics")
    assert response.status_code == 200
    families = {family.name: family for family in text_string_to_metric_families(response.content.decode())}
    return families["jobs_pings_waiting"].samples[0].value
