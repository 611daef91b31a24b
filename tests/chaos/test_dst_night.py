"""A real beat and worker through a transition night, in minutes: a zone of the test's own, compiled
with zic, skips two minutes of its wall clock now and repeats two a few minutes later. Every slot
of the skipped minutes runs once, shifted by the gap; a slot of the repeated minutes runs once, at
its first occurrence. Berlin's own nights cannot be waited for (its clocks change at 02:00 in March
and October); tests/test_dst_nights.py drives the scheduler's tick through them on a test clock.

The expected slots come from the test's own oracle (tests/dst_oracle.py) on the compiled zone.
"""

import shutil
import zoneinfo
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus
from jobs.timing import clock

from .. import dst_oracle
from ..conftest import require, wait_for
from ..dst_oracle import FALL_BACK_AFTER, MINUTE
from ..dst_oracle import NIGHT_ZONE as ZONE


@pytest.fixture
def night_zone(tmp_path):
    """The zone, compiled into a directory of its own that this process and the started ones read
    first (PYTHONTZPATH), and the moment it jumps: the first whole minute at least 30 s away (the
    worker and beat start in that time)."""
    require(shutil.which("zic") is not None, "zic is not installed (Debian's libc-bin has it)")
    now = timezone.now()
    jump = (now + timedelta(seconds=30 + 59)).replace(second=0, microsecond=0)
    zones = dst_oracle.compile_night_zone(jump, tmp_path)
    default_path = zoneinfo.TZPATH
    zoneinfo.reset_tzpath(to=[str(zones), *default_path])
    try:
        yield jump, f"{zones}:{':'.join(default_path)}"
    finally:
        zoneinfo.reset_tzpath(to=default_path)
        zoneinfo.ZoneInfo.clear_cache(only_keys=[ZONE])


@pytest.mark.timeout(480)
def test_a_real_beat_runs_every_slot_of_a_skipped_stretch_once_and_a_repeated_ones_once(processes, ledger,
                                                                                        night_zone):
    jump, tzpath = night_zone
    expression, window = dst_oracle.night_schedule(jump)
    expected = dst_oracle.slots_between(expression, ZONE, *window)
    assert expected == [jump, jump + MINUTE, jump + 2 * MINUTE]  # the oracle, checked by hand
    job = save_job(Job(name="night", kind="callable", target="test.ledger", kwargs={"path": ledger.path}),
                   {"type": "cron", "cron": expression, "timezone": ZONE})

    processes.worker(concurrency=2, PYTHONTZPATH=tzpath)
    processes.beat(name="night", PYTHONTZPATH=tzpath)
    # Past the second reading of the repeated minute, by the database's clock (the scheduler's).
    second_reading = jump + FALL_BACK_AFTER + MINUTE
    wait_for(lambda: clock.now() > second_reading + timedelta(seconds=10), timeout=400, message="the night to pass")
    wait_for(lambda: not job.runs.exclude(status=RunStatus.SUCCEEDED).exists(), timeout=60,
             message="the runs to finish")

    runs = JobRun.objects.filter(job=job, scheduled_for__gte=window[0], scheduled_for__lt=window[1])
    assert Counter(runs.values_list("scheduled_for", flat=True)) == Counter(expected)
    assert sorted(row[1] for row in ledger.lines("start")) == sorted(f"{run.pk}:1" for run in runs)
