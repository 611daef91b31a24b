"""A realistic mix of many jobs, made fast through the service's own bulk save path.

The mix (``entries(n)``), drawn from a seeded generator so each size is the same jobs every time:

- 1 % due every minute (cron ``* * * * *``);
- 10 % hourly at a random minute (``M * * * *``);
- the rest daily at a random minute and hour (``M H * * *``);
- 20 % of them in time zones with daylight saving time (Europe/Berlin, America/New_York,
  Australia/Sydney), the rest in UTC;
- 5 % paused (``enabled: false``);
- every job runs the built-in no-op function (``builtin.noop``), so a soak's workers run them all.

``create(n)`` saves them as ``manage.py jobs apply`` saves a file's new jobs: ``actions.save_many``
(the permission checks, one audit entry per chunk, ``definitions.save_jobs``: the schedule rows found
or made in a few queries, each job checked, inserted in batches), 10,000 jobs at a time, the fields
the API's serializer checks left to it as ``jobs apply`` does. ``write_file(path, n)`` writes the
same jobs as a JSON file for ``manage.py jobs apply`` itself.

Importable by the benchmark scripts (after ``benchenv.setup()``) and usable alone:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_scale .venv/bin/python bench/mix.py --jobs 100000
    .venv/bin/python bench/mix.py --jobs 100000 --file /tmp/mix.json      # the file only
"""

import json
import os
import random
import time

import benchenv

DST_ZONES = ["Europe/Berlin", "America/New_York", "Australia/Sydney"]
CHUNK = 10000  # jobs per save_many, as ``jobs apply`` saves (as_code.SAVE_CHUNK)
PREFIX = "mix-"


def entries(n, seed=21):
    """The ``n`` jobs of the mix as ``jobs apply`` file entries (dicts), in a fixed order."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        draw = rng.random()
        if draw < 0.01:
            cron = "* * * * *"
        elif draw < 0.11:
            cron = f"{rng.randrange(60)} * * * *"
        else:
            cron = f"{rng.randrange(60)} {rng.randrange(24)} * * *"
        zone = rng.choice(DST_ZONES) if rng.random() < 0.20 else "UTC"
        entry = {"name": f"{PREFIX}{i:07d}", "kind": "callable", "target": "builtin.noop",
                 "schedule": {"type": "cron", "cron": cron, "timezone": zone}}
        if rng.random() < 0.05:
            entry["enabled"] = False
        out.append(entry)
    return out


def write_file(path, n, seed=21):
    """The mix as a JSON file of ``manage.py jobs apply``; its size in bytes."""
    with open(path, "w", encoding="utf-8") as out:
        json.dump({"jobs": entries(n, seed)}, out)
    return os.path.getsize(path)


def create(n, seed=21, progress=None):
    """Save the ``n`` jobs of the mix through ``actions.save_many`` (the bulk path of ``jobs apply``).
    Returns the seconds it took."""
    from jobs import collector

    started = time.perf_counter()
    with collector.paused():  # as jobs apply reads and saves a file (jobs.collector)
        _create(entries(n, seed), progress)
    return time.perf_counter() - started


def _create(all_entries, progress):
    from jobs.actions import jobs as actions
    from jobs.as_code import files as as_code
    from jobs.models import Job

    actor, n = actions.Actor.command_line(), len(all_entries)
    for start in range(0, n, CHUNK):
        new = []
        for entry in all_entries[start:start + CHUNK]:
            job = Job(name=entry["name"], kind=entry["kind"], target=entry["target"],
                      enabled=entry.get("enabled", True))
            new.append((job, entry["schedule"]))
        refused = actions.save_many(actor, new, [], checked_fields=as_code.CHECKED_BY_THE_SERIALIZER,
                                    detail="bench mix")
        if refused:
            raise SystemExit(f"the mix was refused: {next(iter(refused.values()))}")
        if progress:
            progress(start + len(new), n)


def describe(n, seed=21):
    """Counts of the mix: {every minute, hourly, daily, in a DST zone, paused}."""
    counts = {"every minute": 0, "hourly": 0, "daily": 0, "DST zone": 0, "paused": 0}
    for entry in entries(n, seed):
        minute, hour, *_ = entry["schedule"]["cron"].split()
        counts["every minute" if minute == "*" else "hourly" if hour == "*" else "daily"] += 1
        counts["DST zone"] += entry["schedule"]["timezone"] != "UTC"
        counts["paused"] += not entry.get("enabled", True)
    return counts


# --- helpers of bench/scale.py and bench/soak.py

def expected_slots(start, end):
    """How many slots the enabled jobs have in [start, end): one job per schedule row asked for its
    slots (``Job.slots_between``), times the enabled jobs on that row."""
    from django.db.models import Count

    from jobs.models import Job

    total = 0
    per_row = (Job.objects.filter(enabled=True, crontab__isnull=False).values("crontab_id")
               .annotate(n=Count("id")).order_by())
    for row in per_row:
        job = Job.objects.select_related("crontab").filter(crontab_id=row["crontab_id"]).first()
        total += row["n"] * len(job.slots_between(start, end, 100000))
    return total


def main():
    args = benchenv.arguments(__doc__, jobs=100000, seed=21,
                              file=(None, "only write the mix as a JSON file for `manage.py jobs apply`"))
    print(describe(args.jobs, args.seed))
    if args.file:
        print(f"{write_file(args.file, args.jobs, args.seed) / 1e6:.1f} MB written to {args.file}")
        return
    benchenv.setup()
    from harness import database

    database.migrate()
    seconds = create(args.jobs, args.seed, progress=lambda done, total: print(f"  {done:,}/{total:,}", flush=True))
    print(f"created {args.jobs:,} jobs in {seconds:.1f} s")


if __name__ == "__main__":
    main()
