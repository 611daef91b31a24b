"""The cost of one tag report (``GET /api/reports/?tag=...&days=90``) over 1,000 every-minute cron jobs
that share the tag, created 100 days ago, in-process as staff: the time of each of a few requests.

Seeds the database once (a rerun finds the jobs and skips it).

    psql -h 127.0.0.1 -U postgres -c "create database scheduler_report_bench"
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_report_bench REDIS_URL=redis://127.0.0.1:6379/4 \\
        SECRET_KEY=x .venv/bin/python bench/tag_report.py
"""

import statistics
import time
from datetime import timedelta

import benchenv
from harness import database

REPO = benchenv.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from jobs.definitions.jobs import save_jobs  # noqa: E402
from jobs.models import Job  # noqa: E402

TAG = "fleet"


def seed(count):
    database.migrate()
    if Job.objects.filter(tags__contains=[TAG]).count() >= count:
        return
    save_jobs([(Job(name=f"fleet-{n}", kind="callable", target="builtin.noop", tags=[TAG]),
                {"type": "cron", "cron": "* * * * *", "timezone": "UTC"}) for n in range(count)])
    Job.objects.filter(tags__contains=[TAG]).update(created_at=timezone.now() - timedelta(days=100))


def main():
    args = benchenv.arguments(__doc__, jobs=1000, days=90, requests=3)
    seed(args.jobs)
    staff, _ = get_user_model().objects.get_or_create(username="bench-staff", defaults={"is_staff": True,
                                                                                       "is_superuser": True})
    client = Client(SERVER_NAME="localhost")  # a host ALLOWED_HOSTS accepts
    client.force_login(staff)
    timings = []
    for _ in range(args.requests):
        started = time.perf_counter()
        response = client.get(f"/api/reports/?tag={TAG}&days={args.days}", HTTP_ACCEPT="application/json")
        timings.append(time.perf_counter() - started)
        body = response.json() if response["Content-Type"].startswith("application/json") else {"body": response.content[:300]}
        print(f"status {response.status_code}: {timings[-1]:.2f} s",
              {k: body.get(k) for k in ("slots_expected", "slots_with_run", "tag")} if response.status_code == 200
              else body, flush=True)
    print(f"{args.jobs} jobs, days={args.days}: median {statistics.median(timings):.2f} s, "
          f"min {min(timings):.2f} s over {len(timings)} request(s)")


if __name__ == "__main__":
    main()
