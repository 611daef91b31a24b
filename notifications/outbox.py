"""Where run events enter the notification system (filled in by the notifications app)."""


def record_event(run, event, **details):
    """Record that ``event`` happened to ``run``, inside the caller's transaction.

    Events: failed, attempt_failed, timed_out, succeeded (and, from the monitor, sla_overrun,
    missed). Must never raise into the caller and never do network I/O.
    """
