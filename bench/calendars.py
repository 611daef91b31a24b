"""What business calendars cost the scheduler: microseconds per ``Job.slot_after`` with and without
day rules, and one tick (``dispatch_due``) of jobs due at once with and without them, in one
invocation (the baseline is the same schedule without rules, in the same run).

Each ``slot_after`` row walks a job's slots from Friday 2026-12-18, for a year or --calls calls
(each call starting where the last one ended, as the scheduler does), and gives the mean per call,
the best of --rounds rounds; the
calendar's dates are cached per process (``jobs.models.calendar.day_rules_cache``), so a row measures
the warm path, and the "cold" row forgets the cache before every call. The tick rows make --jobs
jobs due at the same moment and time one ``dispatch_due`` of them (a batch of all of them).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_bench_calendars REDIS_URL=redis://127.0.0.1:6379/9 \\
        .venv/bin/python bench/calendars.py [--rounds 3] [--jobs 2000]

Needs a database it may fill (it migrates it and empties the jobs' tables).
"""

import time
from datetime import UTC, datetime, timedelta

import benchenv
from harness import database
from harness.table import say

REPO = benchenv.setup()


from jobs.definitions.jobs import apply_schedule  # noqa: E402
from jobs.models import Calendar, Job, JobRun  # noqa: E402
from jobs.models.calendar import day_rules_cache  # noqa: E402
from jobs.scheduling import dispatch  # noqa: E402

START = datetime(2026, 12, 18, tzinfo=UTC)  # a Friday before Christmas: weekends and holidays come at once
END = datetime(2027, 12, 18, tzinfo=UTC)
SCHEDULES = {
    "09:00 daily, Berlin": {"type": "cron", "cron": "0 9 * * *", "timezone": "Europe/Berlin"},
    "every 5 min, Berlin": {"type": "cron", "cron": "*/5 * * * *", "timezone": "Europe/Berlin"},
    "every 15 min (interval)": {"type": "interval", "every_seconds": 900},
}
COLD_ROW = "09:00 daily, Berlin"
RULES = {
    "none (baseline)": {},
    "calendar de-be": {"calendars": ["de-be"]},
    "business days + de-be": {"calendars": ["de-be"], "business_days": True},
    "last business day + de-be": {"calendars": ["de-be"], "business_days": True, "business_day_of_month": -1},
    "3rd business day + de-be": {"calendars": ["de-be"], "business_days": True, "business_day_of_month": 3},
}


def reset():
    database.empty(JobRun, Job, Calendar)
    Calendar.objects.create(name="de-be", country="DE", subdivision="BE",
                            dates=[{"date": f"2026-{month:02d}-15", "label": "closure"} for month in range(1, 13)])
    day_rules_cache.refresh(force=True)


def job_with(schedule, rules, name="bench"):
    job = Job(name=name, kind="callable", target="builtin.noop", **rules)
    apply_schedule(job, schedule)
    job.next_run_at = None  # an interval's grid from the walk's start
    return job


def per_call(job, rounds, calls_at_most, cold=False):
    """(µs per slot_after, slots found) walking the job's slots through the year (at most
    ``calls_at_most`` of them)."""
    best = None
    for _ in range(rounds):
        calls, cursor = 0, START
        began = time.perf_counter()
        while cursor is not None and cursor < END and calls < calls_at_most:
            if cold:
                day_rules_cache.generation = None  # forget: the next call reads the calendars again
                day_rules_cache.checked_at = float("-inf")
            cursor = job.slot_after(cursor)
            calls += 1
        took = (time.perf_counter() - began) / calls * 1e6
        best = took if best is None else min(best, took)
    return best, calls - (cursor is None or cursor >= END)


def tick_ms(rules, jobs):
    """One dispatch_due of ``jobs`` jobs due at the same moment: milliseconds."""
    database.empty(JobRun, Job)
    template = job_with(SCHEDULES["09:00 daily, Berlin"], rules)
    due = datetime(2026, 12, 28, 8, 0, tzinfo=UTC)  # a Monday at 09:00 in Berlin, a business day
    Job.objects.bulk_create([Job(name=f"j{i}", kind="callable", target="builtin.noop", schedule_type="cron",
                                 crontab=template.crontab, next_run_at=due, **rules) for i in range(jobs)])
    now = due + timedelta(seconds=1)
    began = time.perf_counter()
    report = dispatch.dispatch_due(now=now, batch=jobs)
    took = (time.perf_counter() - began) * 1000
    assert report.runs_created == jobs, report
    return took


def main():
    args = benchenv.arguments(__doc__, rounds=3, jobs=2000, calls=(600, "slot_after calls per row at most"))
    database.migrate()
    reset()
    say(f"{'schedule':26} {'day rules':28} {'slots':>9} {'µs/call':>9} {'× baseline':>11}")
    for label, schedule in SCHEDULES.items():
        baseline = None
        for rules_label, rules in RULES.items():
            job = job_with(schedule, rules)
            micro, slots = per_call(job, args.rounds, args.calls)
            baseline = baseline or micro
            say(f"{label:26} {rules_label:28} {slots:>9} {micro:>9.1f} {micro / baseline:>10.2f}×")
        if label == COLD_ROW:  # a read of the calendars per call: once is enough to see it
            cold, slots = per_call(job_with(schedule, RULES["business days + de-be"]), 1, args.calls, cold=True)
            say(f"{label:26} {'business days, cold cache':28} {slots:>9} {cold:>9.1f} {cold / baseline:>10.2f}×")
    forced = time.perf_counter()
    for _ in range(1000):
        day_rules_cache.refresh(force=True)
    say(f"\nday_rules_cache.refresh(force=True), once a tick with day rules: "
        f"{(time.perf_counter() - forced) * 1000:.3f} ms")
    say(f"\n{'tick of due jobs':40} {'jobs':>6} {'ms':>9}")
    for rules_label in ("none (baseline)", "calendar de-be", "business days + de-be"):
        say(f"{rules_label:40} {args.jobs:>6} {tick_ms(RULES[rules_label], args.jobs):>9.1f}")

if __name__ == "__main__":
    main()
