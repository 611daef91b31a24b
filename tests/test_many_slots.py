"""The forecast's bulk cron slots (jobs.timing.many_slots) are the slots ``Job.slots_between`` gives one
by one, over windows that hold DST changes (forward, back, half an hour, at midnight) and windows
that hold none."""

from datetime import UTC, datetime, timedelta

import pytest
from django_celery_beat.models import CrontabSchedule

from jobs.models import Job, ScheduleType
from jobs.timing import many_slots

pytestmark = pytest.mark.postgres("the bulk slot math reads no database: once, on PostgreSQL, is enough")

EXPRESSIONS = ["* * * * *", "*/15 * * * *", "30 2 * * *", "0,30 1-3 * * *", "0 0 * * *", "59 23 * * *",
               "*/7 2 * * 0", "0 9 * * MON-FRI", "0 12 1,15 * *", "0 3 1 * 1", "15 */4 29 2 *", "0 0 L * *",
               "0 0 * * 5#2", "45 1 * 3,10,11 7", "6-59/20 0-4 * * *"]
WINDOWS = [  # (zone, start, hours)
    ("Europe/Berlin", datetime(2026, 3, 28, 12, tzinfo=UTC), 30),
    ("Europe/Berlin", datetime(2026, 10, 24, 20, tzinfo=UTC), 36),
    ("America/New_York", datetime(2026, 3, 7, 0, tzinfo=UTC), 72),
    ("America/New_York", datetime(2026, 10, 31, 12, tzinfo=UTC), 48),
    ("Australia/Lord_Howe", datetime(2026, 4, 4, 0, tzinfo=UTC), 48),  # a change of half an hour
    ("America/Santiago", datetime(2026, 9, 5, 0, tzinfo=UTC), 48),  # at midnight
    ("Asia/Kolkata", datetime(2026, 6, 1, 7, 13, tzinfo=UTC), 168),
    ("UTC", datetime(2026, 2, 27, 0, tzinfo=UTC), 72),
]


def stand_in(expression, zone):
    minute, hour, dom, month, dow = expression.split()
    crontab = CrontabSchedule(minute=minute, hour=hour, day_of_month=dom, month_of_year=month, day_of_week=dow,
                              timezone=zone)
    return Job(schedule_type=ScheduleType.CRON, crontab=crontab)


@pytest.mark.parametrize("zone, start, hours", WINDOWS)
def test_bulk_slots_are_the_slots_one_by_one(zone, start, hours):
    end = start + timedelta(hours=hours)
    for expression in EXPRESSIONS:
        job = stand_in(expression, zone)

        def exact(a, b, job=job):
            return job.slots_between(a, b, 10**6)

        assert many_slots.cron_slots_between(expression, zone, start, end, exact) == exact(start, end), expression


def test_offset_changes_are_found_to_the_second():
    from zoneinfo import ZoneInfo

    changes = many_slots.offset_changes(ZoneInfo("Europe/Berlin"), datetime(2026, 1, 1, tzinfo=UTC),
                                        datetime(2027, 1, 1, tzinfo=UTC))
    assert changes == [(datetime(2026, 3, 29, 1, tzinfo=UTC), timedelta(hours=1)),
                       (datetime(2026, 10, 25, 1, tzinfo=UTC), timedelta(hours=1))]
