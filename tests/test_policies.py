"""Per-job policies: catch-up after downtime, overlap, start deadline, jitter."""

import time
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus
from jobs.scheduling import dispatch

from .conftest import wait_for


def interval_job(name, every=60, target="builtin.noop", **fields):
    return save_job(Job(name=name, kind="callable", target=target, **fields),
                    {"type": "interval", "every_seconds": every})


def statuses(job):
    return list(job.runs.order_by("scheduled_for").values_list("status", flat=True))


def behind_by(job, slots, every=60):
    """Pretend the scheduler was down: the job's next slot lies ``slots`` periods in the past."""
    Job.objects.filter(pk=job.pk).update(next_run_at=timezone.now() - timedelta(seconds=every * slots - 1))
    job.refresh_from_db()


@pytest.mark.django_db
@override_settings(JOBS_MISFIRE_GRACE_SECONDS=5)
@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("none", ["skipped", "skipped", "skipped"]),
        ("latest", ["skipped", "skipped", "queued"]),
        ("all", ["queued", "queued", "queued"]),
    ],
)
def test_it_applies_the_catch_up_policy_to_slots_missed_while_down(policy, expected):
    job = interval_job(f"catchup-{policy}", catchup_policy=policy)
    behind_by(job, 3)

    dispatch.dispatch_due()

    assert statuses(job) == expected
    skipped = job.runs.filter(status=RunStatus.SKIPPED).first()
    if skipped:
        assert skipped.reason == f"missed: catch-up policy '{policy}'"
    job.refresh_from_db()
    assert job.next_run_at > timezone.now()


@pytest.mark.django_db
def test_a_second_dispatch_of_the_same_slots_adds_nothing():
    job = interval_job("twice", catchup_policy="all")
    behind_by(job, 2)
    slot = job.next_run_at

    dispatch.dispatch_due()
    Job.objects.filter(pk=job.pk).update(next_run_at=slot)  # a stale second leader
    dispatch.dispatch_due()

    assert job.runs.count() == 2


@pytest.mark.django_db
def test_the_schedulers_insert_and_the_orm_agree_on_what_a_slot_is():
    # On SQLite times are compared as text: the scheduler's raw insert must write them as the ORM does,
    # or the one-run-per-slot fence and every lookup by time miss (a slot run twice).
    job = interval_job("fenced")
    slot = timezone.now().replace(microsecond=0) - timedelta(minutes=2)
    JobRun.objects.create(job=job, scheduled_for=slot, status=RunStatus.SUCCEEDED)

    assert lifecycle.create_runs([(job, slot, RunStatus.QUEUED, "", None)], timezone.now()) == []
    [(run_id, *_)] = lifecycle.create_runs([(job, slot + timedelta(minutes=1), RunStatus.QUEUED, "", None)],
                                              timezone.now())

    assert job.runs.count() == 2
    assert JobRun.objects.get(job=job, scheduled_for=slot + timedelta(minutes=1)).pk == run_id
    assert not JobRun.objects.filter(job=job, scheduled_for__gt=slot + timedelta(minutes=1)).exists()


@pytest.mark.django_db
def test_jitter_holds_a_run_back_by_at_most_its_jitter():
    job = interval_job("jittery", jitter_seconds=30)
    behind_by(job, 1)

    dispatch.dispatch_due()

    run = job.runs.get()
    assert run.status == RunStatus.PENDING
    # The slot is a little late already, so the jitter counts from the moment it was dispatched.
    assert run.created_at <= run.next_attempt_at <= run.created_at + timedelta(seconds=30)
    assert lifecycle.release_pending(now=run.next_attempt_at - timedelta(seconds=0.001)) == 0
    assert lifecycle.release_pending(now=run.next_attempt_at) == 1
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED


def ledger_intervals(ledger):
    starts = {key: float(ts) for _, key, ts in ledger.lines("start")}
    ends = {key: float(ts) for _, key, ts in ledger.lines("end")}
    return sorted((starts[k], ends.get(k, float("inf"))) for k in starts)


def assert_never_concurrent(ledger):
    spans = ledger_intervals(ledger)
    for (_, end), (next_start, _) in zip(spans, spans[1:], strict=False):
        assert next_start >= end


def overlapping_runs(processes, ledger, policy, seconds, succeeded):
    """A job due every second whose runs take ``seconds``, under the overlap ``policy``, on a worker
    and beat until ``succeeded`` runs succeeded, then disabled."""
    job = interval_job(f"{policy}-overlap", every=1, target="test.ledger", overlap_policy=policy,
                       kwargs={"path": ledger.path, "seconds": seconds})
    processes.worker()
    processes.beat()
    wait_for(lambda: job.runs.filter(status=RunStatus.SUCCEEDED).count() >= succeeded, timeout=40,
             message=f"{succeeded} runs")
    Job.objects.filter(pk=job.pk).update(enabled=False)
    return job


def test_the_skip_policy_records_overlapping_slots_as_skipped(processes, ledger):
    job = overlapping_runs(processes, ledger, "skip", seconds=2.5, succeeded=2)

    skipped = job.runs.filter(status=RunStatus.SKIPPED)
    assert skipped.count() >= 2
    assert all(r.reason.startswith("overlap: run #") for r in skipped)
    assert_never_concurrent(ledger)


def test_the_queue_policy_runs_overlapping_slots_one_after_another(processes, ledger):
    job = overlapping_runs(processes, ledger, "queue", seconds=1.5, succeeded=3)

    assert not job.runs.filter(status=RunStatus.SKIPPED).exists()
    assert_never_concurrent(ledger)


def test_the_replace_policy_cancels_the_earlier_run(processes):
    job = save_job(Job(name="replace-overlap", kind="command", target="sleep 30", overlap_policy="replace"),
                   {"type": "interval", "every_seconds": 2})
    processes.worker()
    processes.beat()

    cancelled = wait_for(lambda: job.runs.filter(status=RunStatus.CANCELLED).first(), timeout=30,
                         message="a replaced run")
    Job.objects.filter(pk=job.pk).update(enabled=False)

    assert cancelled.reason == "replaced by a newer slot (overlap policy 'replace')"
    assert job.runs.filter(scheduled_for__gt=cancelled.scheduled_for).exists()


def test_a_run_that_cannot_start_by_its_deadline_is_skipped_as_missed(processes):
    job = interval_job("deadline", every=2, start_deadline_seconds=1)
    processes.beat()  # no worker: nothing can start

    missed = wait_for(lambda: job.runs.filter(status=RunStatus.SKIPPED).first(), timeout=30,
                      message="a missed run")
    Job.objects.filter(pk=job.pk).update(enabled=False)

    assert missed.reason.startswith("missed: not started within 1 s of its slot")
    assert JobRun.objects.filter(job=job, status=RunStatus.RUNNING).count() == 0


@pytest.mark.timeout(120)
def test_it_catches_up_on_the_latest_slot_after_beat_was_down_for_three_intervals(processes):
    job = interval_job("down-and-up", every=2, catchup_policy="latest")
    processes.worker()
    beat = processes.beat(JOBS_MISFIRE_GRACE_SECONDS="0.5")
    wait_for(lambda: job.runs.filter(status=RunStatus.SUCCEEDED).count() >= 2, timeout=30, message="two runs")

    processes.kill(beat)
    beat.wait(timeout=10)
    last_before = job.runs.order_by("-scheduled_for").first().scheduled_for
    time.sleep(7)  # three slots come and go with no scheduler
    processes.beat(JOBS_MISFIRE_GRACE_SECONDS="0.5")
    wait_for(lambda: job.runs.filter(scheduled_for__gt=last_before + timedelta(seconds=8)).exists(),
             timeout=30, message="runs after the restart")
    Job.objects.filter(pk=job.pk).update(enabled=False)

    slots = list(job.runs.order_by("scheduled_for").values_list("scheduled_for", flat=True))
    assert all((b - a) == timedelta(seconds=2) for a, b in zip(slots, slots[1:], strict=False))  # no slot without a record
    # The restarted beat's first tick makes every slot of the downtime at once (one created_at):
    # at least three of them, since the test's own clock kept the scheduler down for 7 s.
    after = list(job.runs.filter(scheduled_for__gt=last_before).order_by("scheduled_for")
                 .values_list("status", "reason", "created_at"))
    first_tick = min(created for _, _, created in after)
    caught_up = [(status, reason) for status, reason, created in after if created == first_tick]
    assert len(caught_up) >= 3
    assert [status for status, _ in caught_up[:-1]] == ["skipped"] * (len(caught_up) - 1)
    assert caught_up[-1][0] != "skipped"  # the latest slot ran
    assert all(reason == "missed: catch-up policy 'latest'" for _, reason in caught_up[:-1])


@pytest.mark.timeout(150)
def test_after_a_long_downtime_only_catchup_max_missed_slots_run(processes, ledger):
    # "Long" is past JOBS_MISFIRE_GRACE_SECONDS, lowered to 1 s for the beats: eight seconds down
    # miss about eight slots of an every-second job, of which catchup_max (3) run late.
    from .chaos import invariants

    grace, catchup_max = 1, 3
    job = interval_job("catch-up-all", every=1, target="test.ledger", catchup_policy="all", catchup_max=catchup_max,
                       kwargs={"path": ledger.path, "seconds": 0.1})
    job.first_slot = job.next_run_at
    processes.worker()
    beat = processes.beat(JOBS_MISFIRE_GRACE_SECONDS=grace)
    wait_for(lambda: job.runs.filter(status=RunStatus.SUCCEEDED).count() >= 2, timeout=30, message="two runs")

    processes.kill(beat)
    beat.wait(timeout=10)
    down_from = timezone.now()
    time.sleep(8)
    down_until = timezone.now()
    processes.beat(JOBS_MISFIRE_GRACE_SECONDS=grace)
    wait_for(lambda: job.runs.filter(status=RunStatus.SUCCEEDED, scheduled_for__gt=down_until).count() >= 2,
             timeout=40, message="runs on time after the restart")
    paused_at = timezone.now()
    Job.objects.filter(pk=job.pk).update(enabled=False)

    # Every slot, first and last included, ran once or was skipped saying why.
    invariants.check_slots(job, paused_at, ledger, skipped_reason="missed: catch-up policy 'all'")
    down = list(job.runs.filter(scheduled_for__gt=down_from + timedelta(seconds=grace),
                                scheduled_for__lt=down_until - timedelta(seconds=grace)).values_list("status", flat=True))
    assert len(down) >= catchup_max + 3  # slots surely missed: due while no scheduler ran, older than the grace
    assert down.count(RunStatus.SUCCEEDED) <= catchup_max
    assert down.count(RunStatus.SKIPPED) >= len(down) - catchup_max
    # The slots the restarted scheduler ran late (more than the grace after their slot) are exactly
    # the catchup_max most recent missed ones.
    after_restart = job.runs.filter(created_at__gte=down_until)
    late = [run for run in after_restart.exclude(status=RunStatus.SKIPPED).order_by("scheduled_for")
            if (run.created_at - run.scheduled_for).total_seconds() > grace]
    skipped = list(after_restart.filter(status=RunStatus.SKIPPED).values_list("scheduled_for", flat=True))
    assert len(late) == catchup_max
    assert max(skipped) < late[0].scheduled_for
