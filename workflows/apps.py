from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "workflows"
    verbose_name = "Workflows"

    def ready(self):
        from jobs.as_code import files as files
        from jobs.lifecycle import events
        from jobs.scheduling import duties

        from . import as_code, dispatch, progress

        # A step's run ending moves its workflow run on, in the same transaction. Only workflow
        # steps concern us: the worker records other successes in one statement.
        events.subscribe("workflows", progress.on_run_event, events=events.ENDED,
                         wants_sql={event: "r.trigger = 'workflow'" for event in events.ENDED})
        duties.register("workflows.dispatch", dispatch.dispatch_due_workflows, every="wakeup")
        # ``workflows:`` next to ``jobs:`` in a jobs-as-code file.
        files.register(files.Section("workflows", export=as_code.export_entries, plan=as_code.plan_workflows,
                                     apply=as_code.apply_changes, delete=as_code.delete_pruned))
