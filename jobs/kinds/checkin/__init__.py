"""Check-ins: jobs that run elsewhere (a crontab line, a Kubernetes CronJob, a CI schedule) and report
each run by pinging ``/ping/<uuid>`` (docs/guide/checkins.md). The service never runs them: the
scheduler makes no run and publishes no message for their slots (``runs_elsewhere``); a ping records
the run of the slot it belongs to, and a slot with no ping within ``grace_seconds`` ends failed
(jobs.lifecycle.pings)."""

from django.core.exceptions import ValidationError

from ..base import JobFailed, JobKindSpec

MAX_GRACE_SECONDS = 30 * 24 * 3600


def validate(job):
    errors = {}
    grace = job.grace_seconds
    if not isinstance(grace, int) or not 1 <= grace <= MAX_GRACE_SECONDS:
        errors["grace_seconds"] = f"Must be a number of seconds from 1 to {MAX_GRACE_SECONDS}."
    if job.max_retries:
        errors["max_retries"] = "A check-in job is run elsewhere: the service cannot retry it (give 0)."
    if errors:
        raise ValidationError(errors)


def execute(context):
    # Never published (runs_elsewhere); a message that reached a worker all the same runs nothing.
    raise JobFailed("a check-in job runs elsewhere and reports its runs by pinging its ping_url")


KIND = JobKindSpec(
    name="checkin",
    label="Check-in (runs elsewhere, reports by pings)",
    execute=execute,
    validate=validate,
    fields=("grace_seconds",),
    runs_elsewhere=True,
    result_title="Ping",
)
