"""Check-ins: jobs that run elsewhere (a crontab line, a Kubernetes CronJob, a CI schedule) and report
each run by pinging ``/ping/<uuid>`` (docs/guide/checkins.md). The service never runs them: the
scheduler makes no run and publishes no message for their slots (``runs_elsewhere``); a ping records
the run of the slot it belongs to, and a slot with no ping within ``grace_seconds`` ends failed
(jobs.lifecycle.pings)."""

from django.core.exceptions import ValidationError

from ..base import JobFailed, JobKindSpec


def validate(job):
    # grace_seconds: its bounds are the model field's.
    if job.max_retries:
        raise ValidationError({"max_retries": "A check-in job runs elsewhere: the service cannot retry it (give 0)."})


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
    when_empty={"grace_seconds": "1 hour"},
)
