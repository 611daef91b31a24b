"""Retry backoff through real processes, measured from the attempt start times the job itself
writes: each wait is the capped exponential delay with its jitter (half fixed, half random)."""

import pytest

from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.models import Job, RunStatus

from .conftest import wait_for

BACKOFF, CAP, FAILURES = 2.0, 2.5, 6
# What a retry may take beyond its delay: the leader's 0.2 s tick, publishing, a worker taking it.
LATENCY = 1.5


@pytest.mark.timeout(120)
def test_retries_wait_the_capped_backoff_within_its_jitter_bounds(processes, ledger):
    job = save_job(Job(name="backoff", kind="callable", target="test.flaky",
                       kwargs={"fail_times": FAILURES, "path": ledger.path}, max_retries=FAILURES,
                       retry_backoff_seconds=BACKOFF, retry_backoff_max_seconds=CAP, retry_jitter=True),
                   {"type": "manual"})
    processes.worker(concurrency=1)
    processes.beat()

    run = lifecycle.create_run(job)
    wait_for(lambda: job.runs.filter(pk=run.pk, status=RunStatus.SUCCEEDED).exists(), timeout=80,
             message="the last attempt to succeed")

    starts = [float(stamp) for _, key, stamp in ledger.lines("attempt")]
    assert [key for _, key, _ in ledger.lines("attempt")] == [f"{run.pk}:{n}" for n in range(1, FAILURES + 2)]
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    delays = [min(CAP, BACKOFF * 2 ** n) for n in range(FAILURES)]  # 2, 2.5, 2.5, ... (uncapped: 2, 4, 8, ...)
    for gap, delay in zip(gaps, delays, strict=True):
        assert delay / 2 <= gap <= delay + LATENCY, (gaps, delays)
    # The random half is there: with a fixed delay no wait would be shorter than the delay itself.
    assert any(gap < delay - 0.05 for gap, delay in zip(gaps, delays, strict=True)), (gaps, delays)
