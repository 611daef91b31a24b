from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from jobs import as_code
        from jobs.access import secrets
        from jobs.lifecycle import events
        from jobs.metrics import collector as metrics
        from jobs.scheduling import duties
        from jobs.worker import watchdog

        from . import actions, incidents, outbox, sending, watch
        from . import metrics as notification_metrics

        events.subscribe(
            "notifications", outbox.on_run_event,
            events={"attempt_failed", "succeeded", "failed", "timed_out", "lost", "skipped", events.SLOT_MISSED,
                    events.TOO_OFTEN},
            # A success is news only to a rule that takes successes or recoveries, or too_fast, or to the
            # job's open incident, which it closes.
            wants_sql={"succeeded": f"{outbox.wants_success_sql()} OR {incidents.open_incident_sql()}"},
        )
        events.subscribe("notifications.paused", outbox.on_job_paused, events={events.JOB_PAUSED})
        events.subscribe("notifications.scheduler", outbox.on_scheduler_event,
                         events={events.SCHEDULER_DOWN, events.SCHEDULER_RECOVERED})
        duties.register("notifications.watch", watch.check, every="monitor")
        duties.register("notifications.send_due", sending.send_due, every="monitor")
        # While no scheduler runs its monitor, the workers' watchdog sends what waits for a retry.
        watchdog.register("notifications.send_due", sending.send_due)
        metrics.register("notifications", notification_metrics.deliveries_by_status)
        as_code.SECTION_MODULES.append("notifications.as_code")  # channels: and rules: in jobs-as-code files
        secrets.register_holder("channels", actions.rotate_channel_secrets)  # manage.py secrets rotate
