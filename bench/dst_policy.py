"""What a job's DST policy costs: µs per ``next_cron_slot`` call under each policy, the default
policy being the baseline of the same run, and optionally the same calls of an older
``schedules.py`` (a before/after in one invocation); and µs per ``dst_preview`` of one job (what
the job's own API view and page add; lists never compute it).

    git show <rev>:jobs/timing/schedules.py > /tmp/old_schedules.py
    .venv/bin/python bench/dst_policy.py --baseline /tmp/old_schedules.py

Each figure is the best of --repeat passes over --calls moments 7 minutes apart (from 2026-11-26,
and from the night before Berlin's spring change, where the gap's slots are searched).
"""

import importlib.util
import sys
import timeit
from datetime import UTC, datetime, timedelta

import benchenv

benchenv.setup()

from jobs.timing import dst, schedules  # noqa: E402

CASES = [("*/5 * * * *", "UTC"), ("0 9 * * 1-5", "Europe/Berlin"), ("*/15 2 * * *", "Europe/Berlin"),
         ("30 2 * * *", "America/New_York")]
POLICIES = [("shift", "first"), ("skip", "first"), ("shift", "second"), ("shift", "both"), ("skip", "both")]
STARTS = {"ordinary day": datetime(2026, 11, 26, 10, 0, tzinfo=UTC),
          "Berlin's spring night": datetime(2027, 3, 27, 22, 0, tzinfo=UTC)}


def load(path):
    spec = importlib.util.spec_from_file_location("baseline_schedules", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def per_call(function, afters, repeat):
    def run():
        for after in afters:
            function(after)
    return min(timeit.repeat(run, number=1, repeat=repeat)) / len(afters) * 1e6


def main():
    args = benchenv.arguments(__doc__, baseline=(None, "an older schedules.py to time beside this one"), calls=1000,
                              repeat=5)
    old = load(args.baseline) if args.baseline else None

    columns = (["before"] if old else []) + [f"{s}/{r}" for s, r in POLICIES]
    print(f"next_cron_slot, µs per call (best of {args.repeat} x {args.calls} calls)")
    print(f"{'expression':16} {'zone':18} {'from':22} " + " ".join(f"{c:>13}" for c in columns))
    for label, start in STARTS.items():
        afters = [start + timedelta(minutes=7 * k) for k in range(args.calls)]
        for expression, zone in CASES:
            figures = []
            if old:
                figures.append(per_call(lambda a, e=expression, z=zone: old.next_cron_slot(e, z, a), afters, args.repeat))
            for skipped, repeated in POLICIES:
                figures.append(per_call(lambda a, e=expression, z=zone, s=skipped, r=repeated:
                                        schedules.next_cron_slot(e, z, a, s, r), afters, args.repeat))
            print(f"{expression:16} {zone:18} {label:22} " + " ".join(f"{f:13.1f}" for f in figures))

    print("\ndst_preview of one job, µs per call (the first: the zone's changes not yet cached)")
    print(f"{'zone':22} {'first call':>12} {'then':>10}")
    now = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)
    for zone in ("Europe/Berlin", "Australia/Lord_Howe", "Asia/Tokyo", "UTC"):
        dst._changes_of_days.cache_clear()
        first = per_call(lambda a, z=zone: dst.preview("*/15 2 * * *", z, "skip", "both", a), [now], 1)
        then = per_call(lambda a, z=zone: dst.preview("*/15 2 * * *", z, "skip", "both", a), [now] * 200, args.repeat)
        print(f"{zone:22} {first:12.1f} {then:10.1f}")


if __name__ == "__main__":
    sys.exit(main())
