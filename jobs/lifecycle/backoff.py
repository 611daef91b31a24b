"""How long a run waits before its next attempt after a failure (``attempts.record_failure``)."""

from datetime import timedelta


def backoff_delay(job, attempt, rand):
    """Delay before the attempt after ``attempt``: exponential, capped, with full jitter."""
    delay = min(job.retry_backoff_max_seconds, job.retry_backoff_seconds * (2 ** (attempt - 1)))
    if job.retry_jitter:
        # "Equal jitter": half fixed, half random, so gaps still grow with each attempt.
        delay = delay / 2 + rand() * delay / 2
    return timedelta(seconds=delay)
