"""The schedule sync of django-celery-beat's DatabaseScheduler (every 5 minutes, inside beat's tick)
stays small however many cron schedules the jobs have made."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from jobs.scheduling.scheduler import JobScheduler


@pytest.mark.django_db
def test_the_schedule_sync_has_a_case_per_timezone_not_per_cron_schedule():
    # The jobs' cron schedules are django-celery-beat crontab rows: a daily job at a random minute
    # makes one of 1,440 per zone.
    CrontabSchedule.objects.bulk_create(
        CrontabSchedule(minute=str(m), hour=str(h), timezone=zone)
        for zone in ("UTC", "Europe/Berlin") for h in range(24) for m in range(0, 60, 5))
    hour = timezone.now().hour
    soon = PeriodicTask.objects.create(name="soon", task="jobs.prune_runs", crontab=CrontabSchedule.objects.create(
        minute="0", hour=str(hour), timezone="UTC"))
    far = next(h for h in ((hour + k) % 24 for k in range(8, 16)) if h != 4)  # beat always loads 4 o'clock
    later = PeriodicTask.objects.create(name="later", task="jobs.prune_runs", crontab=CrontabSchedule.objects.create(
        minute="0", hour=str(far), timezone="UTC"))
    scheduler = JobScheduler.__new__(JobScheduler)  # the query only, no beat loop

    with CaptureQueriesContext(connection) as queries:
        names = {task.name for task in scheduler.enabled_models_qs()}

    assert sorted(str(zone) for zone in scheduler._get_unique_timezone_names()) == ["Europe/Berlin", "UTC"]
    [sync] = [q["sql"] for q in queries.captured_queries if "django_celery_beat_periodictask" in q["sql"]]
    assert sync.count("WHEN") == 2  # was one per crontab row: 578 here, 6,000 at 100,000 jobs
    assert soon.name in names and later.name not in names
