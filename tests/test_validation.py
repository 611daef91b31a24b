"""Bad job definitions get a clear error per field and save nothing."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError
from django_celery_beat.models import CrontabSchedule, IntervalSchedule

from jobs.definitions.jobs import save_job
from jobs.models import Job

pytestmark = pytest.mark.django_db


def errors_of(job, schedule):
    with pytest.raises(ValidationError) as caught:
        save_job(job, schedule)
    assert not Job.objects.filter(name=job.name).exists()
    return caught.value.message_dict


def callable_job(name="j", target="builtin.noop", **fields):
    return Job(name=name, kind="callable", target=target, **fields)


def test_it_rejects_an_invalid_cron_expression():
    errors = errors_of(callable_job(), {"type": "cron", "cron": "61 * * * *"})
    assert "not a valid cron expression" in errors["cron"][0]


def test_it_rejects_a_cron_expression_with_the_wrong_number_of_fields():
    errors = errors_of(callable_job(), {"type": "cron", "cron": "* * * *"})
    assert "5 fields" in errors["cron"][0]


def test_it_rejects_a_timezone_that_does_not_exist():
    errors = errors_of(callable_job(), {"type": "cron", "cron": "0 3 * * *", "timezone": "Mars/Olympus"})
    assert errors["timezone"] == ["'Mars/Olympus' is not a known IANA timezone."]


def test_it_rejects_an_unknown_registered_function():
    errors = errors_of(callable_job(target="os.system"), {"type": "manual"})
    assert "No registered function named 'os.system'" in errors["target"][0]


def test_it_rejects_a_url_that_is_not_http():
    errors = errors_of(Job(name="h", kind="http", target="file:///etc/passwd"), {"type": "manual"})
    assert errors["target"] == ["Must be an http:// or https:// URL."]


def test_it_rejects_a_negative_or_too_long_timeout():
    assert "timeout_seconds" in errors_of(callable_job(timeout_seconds=-5), {"type": "manual"})
    assert "timeout_seconds" in errors_of(callable_job(timeout_seconds=10**7), {"type": "manual"})


def test_it_rejects_a_duplicate_name():
    save_job(callable_job(name="dup"), {"type": "manual"})
    with pytest.raises(ValidationError) as caught:
        save_job(callable_job(name="dup"), {"type": "manual"})
    assert "name" in caught.value.message_dict
    assert Job.objects.filter(name="dup").count() == 1


def test_it_rejects_two_schedule_kinds_at_once():
    errors = errors_of(callable_job(), {"type": "cron", "cron": "* * * * *", "every_seconds": 5})
    assert "exactly one kind of schedule" in errors["schedule"][0]


def test_the_database_refuses_two_schedule_kinds_even_when_python_is_bypassed():
    job = save_job(callable_job(name="raw"), {"type": "cron", "cron": "0 * * * *"})
    interval = IntervalSchedule.objects.create(every=5, period=IntervalSchedule.SECONDS)
    with pytest.raises(IntegrityError):
        Job.objects.filter(pk=job.pk).update(interval=interval)


def test_a_valid_cron_job_is_saved_with_its_timezone_and_next_slot():
    job = save_job(callable_job(name="nightly"), {"type": "cron", "cron": "30 2 * * *", "timezone": "Europe/Berlin"})
    job.refresh_from_db()
    assert job.crontab.timezone.key == "Europe/Berlin"
    assert job.next_run_at is not None
    assert job.cron_expression == "30 2 * * *"
    assert CrontabSchedule.objects.count() == 1
    assert "02:30" in job.describe_schedule()


@pytest.mark.parametrize(
    ("schedule", "field", "message"),
    [
        ({"type": "cron", "cron": "0 0 31 2 *"}, "cron", "never matches a date"),
        ({"type": "cron", "cron": "0 3 * * *", "timezone": 5}, "timezone", "A timezone is a string"),
        ({"type": "interval", "every_seconds": 10**12}, "every_seconds", "Must be a whole number of seconds"),
        ({"type": "once", "run_at": "0001-01-01T00:00:00+05:00"}, "run_at", "out of the range of dates"),
    ],
)
def test_it_rejects_schedules_that_parse_but_cannot_be_stored_or_never_fire(schedule, field, message):
    errors = errors_of(callable_job(), schedule)
    assert message in errors[field][0]
