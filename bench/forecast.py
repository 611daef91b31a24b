"""The load forecast (``GET /api/forecast/``) over 1,000,000 jobs, against the naive forecast that asks
each job for its slots (``Job.slot_after``) one after the other, in the same invocation.

Seeds the database once (a rerun finds the jobs and skips it) with INSERT ... SELECT generate_series
from one template job: 60 % cron jobs over 80 schedule rows (the 60 minutes that "H * * * *"
resolves to, and 20 others in five zones, some across a DST change), a quarter of them with a spread;
30 % interval jobs (1 min to 1 day) at random places on their grids; 10 % one-time jobs over the next
two days; 1 % disabled. Then times:

- the forecast (``operations.forecast.forecast``) for 24 and 168 hours, its stages apart;
- ``GET /api/forecast/?hours=24`` in-process as staff, and as an owner of 100 of the jobs;
- the naive forecast: every slot of each job walked with ``slot_after`` (a sample of jobs, scaled
  to all of them: walking a million jobs takes too long to wait for).

    psql -h 127.0.0.1 -U postgres -c "create database scheduler_forecast_bench"
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_forecast_bench REDIS_URL=redis://127.0.0.1:6379/4 \\
        SECRET_KEY=x .venv/bin/python bench/forecast.py
"""

import time
from datetime import timedelta

import benchenv
from harness import database
from harness.readings import timed
from harness.table import say

REPO = benchenv.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402
from django_celery_beat.models import ClockedSchedule, CrontabSchedule, IntervalSchedule  # noqa: E402

from jobs.definitions.jobs import save_job  # noqa: E402
from jobs.models import Job  # noqa: E402
from jobs.operations import forecast as forecasts  # noqa: E402
from jobs.timing import spread  # noqa: E402

TARGET_SECONDS = 2.0
OWNED = 100
CRONS = [  # (expression, zone) besides the 60 of "H * * * *"
    ("*/5 * * * *", "UTC"), ("*/15 * * * *", "UTC"), ("0 * * * *", "UTC"), ("0 0 * * *", "UTC"),
    ("30 2 * * *", "Europe/Berlin"), ("0 3 * * *", "Europe/Berlin"), ("*/10 1-3 * * *", "Europe/Berlin"),
    ("0 9 * * 1-5", "America/New_York"), ("30 */2 * * *", "America/New_York"), ("0 2 * * *", "America/New_York"),
    ("0 6 * * *", "Asia/Kolkata"), ("15 */4 * * *", "Asia/Kolkata"), ("0 12 * * *", "Australia/Sydney"),
    ("45 23 * * *", "Australia/Sydney"), ("* * * * *", "UTC"), ("0 */6 * * *", "UTC"), ("5 4 * * 0", "UTC"),
    ("0 1 1 * *", "UTC"), ("20 8-18 * * 1-5", "Europe/London"), ("0 0 * * 6", "Europe/London"),
]
INTERVALS = [60, 300, 900, 3600, 86400]


def seed(total):
    if Job.objects.count() >= total:
        say(f"jobs: {Job.objects.count()} already there")
        return get_user_model().objects.get(username="bench-owner")
    Job.objects.all().delete()
    owner, _ = get_user_model().objects.get_or_create(username="bench-owner")
    get_user_model().objects.get_or_create(username="bench-staff", defaults={"is_staff": True})
    crontabs = [CrontabSchedule.objects.get_or_create(minute=str(m), hour="*", day_of_month="*", month_of_year="*",
                                                      day_of_week="*", timezone="UTC")[0].pk for m in range(60)]
    for expression, zone in CRONS:
        minute, hour, dom, month, dow = expression.split()
        crontabs.append(CrontabSchedule.objects.get_or_create(minute=minute, hour=hour, day_of_month=dom,
                                                              month_of_year=month, day_of_week=dow,
                                                              timezone=zone)[0].pk)
    intervals = [IntervalSchedule.objects.get_or_create(every=e, period=IntervalSchedule.SECONDS)[0].pk
                 for e in INTERVALS]
    now = timezone.now()
    clocked = ClockedSchedule.objects.create(clocked_time=now + timedelta(days=1)).pk
    template = save_job(Job(name="bench-template", kind="callable", target="builtin.noop"),
                        {"type": "cron", "cron": "0 * * * *", "timezone": "UTC"})
    varied = {"id", "name", "schedule_type", "crontab_id", "interval_id", "clocked_id", "next_run_at", "spread",
              "spread_offset_seconds", "enabled", "owner_id"}
    kept = [f.column for f in Job._meta.concrete_fields if f.column not in varied]
    # g: 0..total-1. g % 10 < 6: cron; < 9: interval; else once. Crontab and interval by g's digits.
    sql = f"""
    INSERT INTO jobs_job (name, schedule_type, crontab_id, interval_id, clocked_id, next_run_at, spread,
                          spread_offset_seconds, enabled, owner_id, {", ".join(kept)})
    SELECT 'bench-' || g,
        CASE WHEN g % 10 < 6 THEN 'cron' WHEN g % 10 < 9 THEN 'interval' ELSE 'once' END,
        CASE WHEN g % 10 < 6 THEN (%(crontabs)s::bigint[])[1 + (g / 10) % %(ncron)s] END,
        CASE WHEN g % 10 BETWEEN 6 AND 8 THEN (%(intervals)s::bigint[])[1 + (g / 10) % %(nint)s] END,
        CASE WHEN g % 10 = 9 THEN %(clocked)s END,
        CASE WHEN g % 10 < 6 THEN %(now)s::timestamptz + interval '1 hour'
             WHEN g % 10 < 9 THEN %(now)s::timestamptz + make_interval(secs => random() *
                 ((%(everys)s::int[])[1 + (g / 10) % %(nint)s]))
             ELSE %(now)s::timestamptz + make_interval(secs => random() * 172800) END,
        CASE WHEN g % 4 = 0 AND g % 10 < 6 THEN (ARRAY[300, 3600])[1 + (g / 4) % 2] ELSE 0 END,
        CASE WHEN g % 4 = 0 AND g % 10 < 6 THEN mod(('x' || substr(md5('bench-' || g), 1, 8))::bit(32)::bigint,
                                                    (ARRAY[300, 3600])[1 + (g / 4) % 2]) ELSE 0 END,
        g % 100 <> 1,
        CASE WHEN g < %(owned)s THEN %(owner)s END,
        {", ".join(kept)}
    FROM jobs_job, generate_series(0, %(total)s - 1) AS g WHERE jobs_job.id = %(template)s
    """
    started = time.perf_counter()
    database.execute(sql.replace("%", "%%").replace("%%(", "%("), {
        "crontabs": crontabs, "ncron": len(crontabs), "intervals": intervals, "nint": len(intervals),
        "everys": INTERVALS, "clocked": clocked, "now": now, "owned": OWNED, "owner": owner.pk, "total": total,
        "template": template.pk})
    Job.objects.filter(pk=template.pk).delete()
    for job in Job.objects.filter(spread__gt=0).order_by("?")[:100]:  # the SQL's offsets are the model's
        assert job.spread_offset_seconds == spread.offset_seconds(job.name, job.spread), job.name
    database.execute("VACUUM ANALYZE jobs_job")  # as autovacuum leaves it: index-only scans see the heap all-visible
    say(f"jobs: {total} created in {time.perf_counter() - started:.1f} s")
    return owner


def naive(jobs, now, hours):
    """Each job's slots walked with slot_after, counted per minute: what the forecast would cost
    without groups."""
    end = now + timedelta(hours=hours)
    per_minute = [0] * (hours * 60)
    for job in jobs:
        slot = job.next_run_at if job.schedule_type != "cron" else job.slot_after(now)
        while slot is not None and slot < end:
            if slot >= now:
                per_minute[int((slot - now).total_seconds() // 60)] += 1
            slot = job.slot_after(slot)
    return per_minute


def main():
    args = benchenv.arguments(__doc__, jobs=1_000_000, repeat=5, sample=(2000, "jobs walked by the naive forecast"))
    database.migrate()
    owner = seed(args.jobs)
    staff = get_user_model().objects.get(username="bench-staff")
    enabled = Job.objects.filter(enabled=True)
    now = timezone.now()
    start = now.replace(second=0, microsecond=0)
    rows = []

    for hours in (24, 168):
        p50, worst, result = timed(lambda h=hours: forecasts.forecast(Job.objects.all(), now, h), args.repeat)
        rows.append((f"forecast, {hours} h, every job", p50, worst, f"{result['total_runs']:,} runs, "
                                                                      f"{result['groups']:,} groups"))
    end = start + timedelta(hours=24)
    for name, stage in (("  stage: cron groups (SQL + slots)", lambda: forecasts.cron_groups(enabled, start, end)),
                        ("  stage: interval and one-time groups (SQL + grids)",
                         lambda: forecasts.timed_groups(enabled, start, end))):
        p50, worst, groups = timed(stage, args.repeat)
        rows.append((name, p50, worst, f"{len(groups):,} groups"))

    for label, user in (("staff", staff), ("owner of 100 jobs", owner)):
        client = Client(SERVER_NAME="localhost")  # a host ALLOWED_HOSTS accepts
        client.force_login(user)
        client.get("/api/forecast/?hours=24")  # warm-up

        def request(client=client):
            answer = client.get("/api/forecast/?hours=24")
            assert answer.status_code == 200, answer.content[:200]
            return answer.json()
        p50, worst, body = timed(request, args.repeat)
        rows.append((f"GET /api/forecast/?hours=24, {label}", p50, worst, f"{body['total_runs']:,} runs"))

    sample = list(enabled.select_related("crontab", "interval", "clocked").order_by("?")[:args.sample])
    total_enabled = enabled.count()
    started = time.perf_counter()
    naive(sample, now, 24)
    per_job = (time.perf_counter() - started) / len(sample)
    baseline = per_job * total_enabled
    rows.append((f"naive: slot_after per job, 24 h ({len(sample):,} walked, scaled to {total_enabled:,})",
                 baseline, baseline, f"{per_job * 1000:.2f} ms a job"))

    say(f"\n{args.jobs:,} jobs; target: the forecast under {TARGET_SECONDS:.0f} s\n")
    say(f"{'what':<78} {'p50 s':>8} {'max s':>8} {'x faster':>9}  notes")
    for name, p50, worst, note in rows:
        say(f"{name:<78} {p50:>8.3f} {worst:>8.3f} {baseline / p50:>9.0f}  {note}")
    met = all(p50 < TARGET_SECONDS for name, p50, _, _ in rows if name.startswith(("forecast, 24", "GET")))
    say(f"\ntarget {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
