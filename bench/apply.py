"""``manage.py jobs apply`` of a large file: the bulk path against the one-by-one path it replaced.

Generates --jobs jobs (default 100,000) in a YAML file: registered functions and HTTP calls, cron
schedules in a few time zones (1,440 distinct expressions), intervals, a few one-time jobs and
manual ones, tags, retries and SLAs. Then, in one invocation, on its own database:

- one by one: a sample of --sample jobs (default 1,000) applied as ``jobs apply`` did before the bulk
  path (a serializer per entry, then ``actions.create`` per job: its save, schedule rows and audit
  entry), extrapolated to --jobs;
- bulk, through ``manage.py jobs apply`` (reading the file, the plan printed, saving): create every
  job; the same file again (nothing changes); ``--dry-run`` of a file with 10 % of the jobs changed;
  that file applied; then ``--prune`` of a file without the last 10 %; then the create again from the
  same jobs as a JSON file, and what reading each file takes. Each row gives the wall time and the CPU
  time of this process (PostgreSQL's own work is not in it), and the load average is printed: the
  machine is shared, and the wall time grows with what else runs.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_bench_apply .venv/bin/python bench/apply.py \\
        [--jobs 100000] [--sample 1000]
"""

import io
import json
import os
import tempfile
import time

import benchenv
from harness import database, readings
from harness.table import say

REPO = benchenv.setup(JOBS_SECRETS_KEYS=os.environ.get("JOBS_SECRETS_KEYS", "")
                      or "rc9yqrHp1zCixaJGqeRSHhYPxhaxSEdjWhg9DqEL-Xw=")

import yaml  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402

from audit.models import AuditEntry  # noqa: E402
from jobs.actions import jobs as actions  # noqa: E402
from jobs.as_code import files as as_code  # noqa: E402
from jobs.models import Job  # noqa: E402
from jobs.schemas.jobs import JobSerializer  # noqa: E402
from tests.file_entries import mixed_entry  # noqa: E402


def job_entry(i, changed=False):
    entry = mixed_entry(i, f"bench-job-{i:06d}", "bench")
    if changed:
        entry["description"] = f"changed {i}"
        entry["timeout_seconds"] = 900
    return entry


def write_file(path, n, changed_every=0, keep=None):
    jobs = [job_entry(i, changed=bool(changed_every) and i % changed_every == 0) for i in range(keep or n)]
    with open(path, "w", encoding="utf-8") as out:
        yaml.dump({"jobs": jobs}, out, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)
    return os.path.getsize(path)


def reset():
    database.empty(AuditEntry, Job)


def one_by_one(entries):
    """The path ``jobs apply`` took before the bulk one: each entry checked by a new serializer,
    then saved by ``actions.create`` (its schedule rows, the job, its audit entry)."""
    actor = actions.Actor.command_line()
    fields = as_code.file_fields()
    defaults = {name: as_code.default_of(name) for name, f in fields.items() if not f.required}
    with transaction.atomic():
        for entry in entries:
            serializer = JobSerializer(None, data={**defaults, **entry}, context={"actor": actor})
            if not serializer.is_valid():
                raise SystemExit(f"{entry['name']}: {serializer.errors}")
            values = dict(serializer.validated_data)
            schedule = values.pop("schedule")
            actions.create(actor, Job(**values), schedule, detail="jobs apply")


def apply(path, *options):
    out, err = io.StringIO(), io.StringIO()
    t0, c0 = time.perf_counter(), time.process_time()
    call_command("jobs", "apply", path, *options, stdout=out, stderr=err)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return seconds, cpu, out.getvalue().splitlines()[-1], err.getvalue().splitlines()


def main():
    args = benchenv.arguments(__doc__, jobs=100000, sample=1000)
    database.migrate()
    n = args.jobs
    say(f"database: {connection.vendor} {connection.settings_dict['NAME']}; {n:,} jobs, sample {args.sample:,}; "
        f"load average {readings.load_average()} (2 cores)")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-apply-") as tmp:
        full, changed, pruned = (os.path.join(tmp, name) for name in ("all.yaml", "changed.yaml", "pruned.yaml"))
        size = write_file(full, n)
        write_file(changed, n, changed_every=10)
        write_file(pruned, n, changed_every=10, keep=n - n // 10)
        say(f"file: {size / 1e6:.1f} MB")

        reset()
        sample = [job_entry(i) for i in range(args.sample)]
        t0, c0 = time.perf_counter(), time.process_time()
        one_by_one(sample)
        per_job, cpu_per_job = (time.perf_counter() - t0) / args.sample, (time.process_time() - c0) / args.sample
        say(f"one by one: {per_job * 1000:.1f} ms per job over {args.sample:,} jobs")
        rows.append(("one by one, create (extrapolated)", n, per_job * n, cpu_per_job * n, ""))

        reset()
        for label, path, options, jobs in [
            ("bulk, create", full, (), n),
            ("bulk, the same file again", full, (), n),
            ("bulk, --dry-run of 10 % changed", changed, ("--dry-run",), n),
            ("bulk, 10 % changed", changed, (), n),
            ("bulk, --prune of 10 %", pruned, ("--prune",), n),
        ]:
            seconds, cpu, last, progress = apply(path, *options)
            say(f"{label}: {seconds:.1f} s ({last}; {len(progress)} progress lines)")
            rows.append((label, jobs, seconds, cpu, last))
        assert Job.objects.count() == n - n // 10

        # The same create from a JSON file, and what reading each file costs of it.
        as_json = os.path.join(tmp, "all.json")
        with open(full, encoding="utf-8") as source, open(as_json, "w", encoding="utf-8") as out:
            json.dump(yaml.load(source, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)), out)
        reset()
        seconds, cpu, last, _ = apply(as_json)
        say(f"bulk, create from JSON: {seconds:.1f} s ({last})")
        rows.append(("bulk, create from a JSON file", n, seconds, cpu, last))
        for label, path, fmt in [("reading the YAML file (of create)", full, "yaml"),
                                 ("reading the JSON file (of create)", as_json, "json")]:
            with open(path, encoding="utf-8") as source:
                text = source.read()
            t0, c0 = time.perf_counter(), time.process_time()
            as_code.read_entries(text, fmt)
            rows.append((label, n, time.perf_counter() - t0, time.process_time() - c0, ""))

    base = rows[0][2]
    say("")
    say(f"load average at the end: {readings.load_average()} (2 cores)")
    say(f"| {'apply':<36} | {'jobs':>8} | {'seconds':>8} | {'CPU s':>8} | {'jobs/s':>8} | {'vs one by one':>13} | result")
    say(f"|{'-' * 38}|{'-' * 10}|{'-' * 10}|{'-' * 10}|{'-' * 10}|{'-' * 15}|---")
    for label, jobs, seconds, cpu, last in rows:
        ratio = "" if label.startswith("reading") else f"{base / seconds:.1f}×"
        say(f"| {label:<36} | {jobs:>8,} | {seconds:>8.1f} | {cpu:>8.1f} | {jobs / seconds:>8,.0f} | {ratio:>13} | "
            f"{last}")


if __name__ == "__main__":
    main()
