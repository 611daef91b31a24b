"""A crowded slot's messages: what the leader does at the slot, held messages against the release.

N every-minute cron jobs share one slot. Their runs are made ahead of it by the scheduler's own
tick (``dispatch.dispatch_due``, JOBS_DISPATCH_AHEAD_SECONDS=10), then, at the slot, timed from the
call to the last message on the broker (the wall time of the call; the broker is REDIS_URL):

- held (today): the runs were queued for the slot and their messages held in memory
  (``jobs.lifecycle.ahead``); at the slot the leader asks which jobs were paused and sends them;
- release (the baseline, the way until 2026-11-28): the same runs made ``pending`` with the slot as
  their start time, moved to queued at the slot 2,000 a statement and published
  (``lifecycle.release_timed``, as jittered runs still are).

Each way --repeat times, alternating; the table gives the median and the worst, and the database's
WAL written at the slot per run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_slot REDIS_URL=redis://127.0.0.1:6379/6 \\
        .venv/bin/python bench/slot_send.py --jobs 12000 --repeat 3

Needs a database it may empty and fill (it migrates it) and a Redis database of its own (flushed).
"""

import os
import statistics
import time
from datetime import timedelta

import benchenv
from harness import database
from harness.table import markdown, ratio, say

QUEUE = "slot-send"
REPO = benchenv.setup(JOBS_DISPATCH_AHEAD_SECONDS="10", JOBS_DISPATCH_AHEAD_MIN_JOBS="1", JOBS_DEFAULT_QUEUE=QUEUE)

from django.db import connection  # noqa: E402

from jobs import lifecycle  # noqa: E402
from jobs.actions import jobs as actions  # noqa: E402
from jobs.as_code import files as as_code  # noqa: E402
from jobs.lifecycle import ahead  # noqa: E402
from jobs.models import Job, JobRun, RunStatus  # noqa: E402
from jobs.scheduling import dispatch  # noqa: E402
from jobs.timing import clock  # noqa: E402

HELD, RELEASE = "held (today)", "release (until 2026-11-28)"


def make_jobs(n):
    database.empty()
    actor = actions.Actor.command_line()
    for start in range(0, n, 10000):
        new = [(Job(name=f"slot-{i:07d}", kind="callable", target="builtin.noop"),
                {"type": "cron", "cron": "* * * * *", "timezone": "UTC"}) for i in range(start, min(n, start + 10000))]
        actions.save_many(actor, new, [], checked_fields=as_code.CHECKED_BY_THE_SERIALIZER, detail="bench")
    database.analyze()


def made_ahead(way):
    """The runs of the next free slot made ahead, as ``way`` makes them; the slot."""
    JobRun.objects.all().delete()
    benchenv.drop_queues(os.environ["REDIS_URL"], [QUEUE])
    slot = (clock.now() + timedelta(minutes=2)).replace(second=0, microsecond=0)
    Job.objects.update(next_run_at=slot)
    while dispatch.dispatch_due(now=slot - timedelta(seconds=9)).due_jobs:
        pass
    if way == RELEASE:  # as the runs were made before: waiting, the slot their start time
        ahead.forget()
        JobRun.objects.update(status=RunStatus.PENDING, queued_at=None, next_attempt_at=slot)
    database.execute("CHECKPOINT")
    return slot


def one(sql, params=None):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


def at_the_slot(way, slot):
    wal = one("SELECT pg_current_wal_lsn()")
    started = time.perf_counter()
    sent = lifecycle.publish_runs_ahead(slot) if way == HELD else lifecycle.release_timed(now=slot)
    seconds = time.perf_counter() - started
    return sent, seconds, float(one("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", [wal]))


def main():
    args = benchenv.arguments(__doc__, jobs=12000, repeat=3)
    database.migrate()
    benchenv.use_broker(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    say(f"{args.jobs:,} jobs on one slot ...")
    make_jobs(args.jobs)
    found = {HELD: [], RELEASE: []}
    for round_ in range(args.repeat):
        for way in ([HELD, RELEASE] if round_ % 2 == 0 else [RELEASE, HELD]):
            slot = made_ahead(way)
            sent, seconds, wal_bytes = at_the_slot(way, slot)
            say(f"  {way}: {sent:,} runs sent in {seconds:.3f} s, {wal_bytes / max(sent, 1):,.0f} B of WAL a run")
            found[way].append((seconds, wal_bytes / max(sent, 1), sent))
    rows = []
    for way, readings in found.items():
        seconds = [s for s, _, _ in readings]
        rows.append([way, f"{readings[0][2]:,}", f"{statistics.median(seconds):.3f}", f"{max(seconds):.3f}",
                     f"{statistics.median(w for _, w, _ in readings):,.0f}",
                     ratio(statistics.median(seconds), statistics.median(s for s, _, _ in found[RELEASE]))])
    markdown(["way", "runs", "slot → last sent, median s", "worst s", "WAL a run, B", "÷ release"], rows, "lrrrrr")
    database.empty()


if __name__ == "__main__":
    main()
