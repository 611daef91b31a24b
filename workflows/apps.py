from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "workflows"
    verbose_name = "Workflows"

    def ready(self):
        from jobs import as_code
        from jobs.lifecycle import events
        from jobs.scheduling import duties

        from . import dispatch, progress

        # A step's run ending moves its workflow run on, in the same transaction. Only workflow
        # steps concern us: the worker records other successes in one statement.
        events.subscribe("workflows", progress.on_run_event, events=events.ENDED,
                         wants_sql={event: "r.trigger = 'workflow'" for event in events.ENDED})
        duties.register("workflows.dispatch", dispatch.dispatch_due_workflows, every="wakeup")
        # ``workflows:`` next to ``jobs:`` in a jobs-as-code file.
        as_code.SECTION_MODULES.append("workflows.as_code")
