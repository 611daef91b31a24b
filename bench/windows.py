"""What maintenance windows cost the scheduler's tick: one ``dispatch_due`` of --jobs jobs due at
once with no window, with --windows ``hold`` windows that cover none of the slots (each names 50
jobs and a tag of 1/100 of the jobs; half one-off, half weekly), and with those and one more that
covers every slot (each run born skipped, reason maintenance). Each row is the best of --rounds
ticks, the rows taken in turn; the windows are made anew before each, so the tick pays for
reading them and the jobs they reach (``jobs.models.window.window_book``: the windows at most
once a second, the jobs their tags reach after a change or every 10 seconds).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_bench_windows REDIS_URL=redis://127.0.0.1:6379/9 \\
        .venv/bin/python bench/windows.py [--jobs 10000] [--windows 100] [--rounds 3]

Needs a database it may fill (it migrates it and empties the jobs' tables).
"""

import random
import time
from datetime import UTC, datetime, timedelta

import benchenv
from harness import database
from harness.table import say

REPO = benchenv.setup()


from jobs.definitions.jobs import apply_schedule  # noqa: E402
from jobs.models import Job, JobRun, Window  # noqa: E402
from jobs.models.window import window_book  # noqa: E402
from jobs.scheduling import dispatch  # noqa: E402

DUE = datetime(2026, 12, 28, 8, 0, tzinfo=UTC)


def make_jobs(count):
    template = Job(name="bench", kind="callable", target="builtin.noop")
    apply_schedule(template, {"type": "cron", "cron": "0 9 * * *", "timezone": "Europe/Berlin"})
    Job.objects.bulk_create([Job(name=f"j{i}", kind="callable", target="builtin.noop", schedule_type="cron",
                                 crontab=template.crontab, next_run_at=DUE, tags=[f"t{i % 100}"])
                             for i in range(count)], batch_size=2000)
    return list(Job.objects.values_list("pk", flat=True))


def make_windows(count, ids):
    rng = random.Random(7)
    windows = []
    for i in range(count):
        when = ({"starts_at": DUE + timedelta(days=1 + i), "ends_at": DUE + timedelta(days=1 + i, hours=2)}
                if i % 2 else {"cron": "0 3 * * 0", "duration_seconds": 7200, "timezone": "Europe/Berlin"})
        windows.append(Window(name=f"w{i}", mode="hold", jobs=sorted(rng.sample(ids, 50)), tags=[f"t{i}"], **when))
    Window.objects.bulk_create(windows)


def tick_ms(jobs, expect):
    JobRun.objects.all().delete()
    Job.objects.update(next_run_at=DUE, last_run=None)
    window_book.loaded_at = float("-inf")
    began = time.perf_counter()
    report = dispatch.dispatch_due(now=DUE + timedelta(seconds=1), batch=jobs)
    took = (time.perf_counter() - began) * 1000
    assert (report.runs_created, report.slots_skipped) == expect, report
    return took


def checks_ms(ids):
    """(reading the windows, the tick's look at them for every due job on that copy): milliseconds."""
    window_book.generation = None  # as after a change: the windows and the jobs they reach read again
    began = time.perf_counter()
    window_book.refresh(force=True)
    read = time.perf_counter()
    for job_id in ids:
        window_book.covering("hold", job_id, DUE)
    return (read - began) * 1000, (time.perf_counter() - read) * 1000


def main():
    args = benchenv.arguments(__doc__, jobs=10000, windows=100, rounds=3)
    database.migrate()
    database.empty(JobRun, Job, Window)
    ids = make_jobs(args.jobs)
    rows = {"no window (baseline)": (0, (args.jobs, 0)),
            f"{args.windows} hold windows, none on now": (args.windows, (args.jobs, 0)),
            f"{args.windows + 1} hold windows, one holding every slot": (args.windows + 1, (0, args.jobs))}
    best, checks = {}, None
    for _ in range(args.rounds):  # the rows in turn, round after round: the machine's load falls on each alike
        for label, (windows, expect) in rows.items():
            Window.objects.all().delete()
            make_windows(min(windows, args.windows), ids)
            if windows > args.windows:
                Window.objects.create(name="everything", mode="hold", starts_at=DUE - timedelta(hours=1),
                                      ends_at=DUE + timedelta(hours=1), tags=[f"t{i}" for i in range(100)])
            took = tick_ms(args.jobs, expect)
            best[label] = min(best.get(label, took), took)
            if windows == args.windows:
                checks = min(checks or (float("inf"),), checks_ms(ids))
    say(f"{'tick of due jobs (best of ' + str(args.rounds) + ')':52} {'jobs':>6} {'ms':>9}")
    for label, took in best.items():
        say(f"{label:52} {args.jobs:>6} {took:>9.1f}")
    say(f"\n{args.windows} windows over {args.jobs} jobs: read in {checks[0]:.1f} ms (at most once a second), "
        f"checked for every job in {checks[1]:.1f} ms")
    database.empty(JobRun, Job, Window)


if __name__ == "__main__":
    main()
