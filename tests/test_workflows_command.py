"""manage.py workflows: list, show, run, re-run, cancel."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from workflows.models import WorkflowRun

from .workflow_helpers import make_job, make_workflow

pytestmark = pytest.mark.django_db


def run_command(*args):
    out = StringIO()
    call_command("workflows", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def diamond():
    for name in "abcd":
        make_job(name)
    return make_workflow("diamond", "abcd", [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])


def test_list_and_show(diamond):
    assert "diamond  4     Manual only" in run_command("list")
    shown = run_command("show", "diamond")
    assert "  0: a\n  1: b, c\n  2: d\n" in shown
    assert "  b → d\n" in shown


def test_run_then_cancel_then_rerun(diamond):
    assert run_command("run", "diamond").startswith("Workflow run ")
    wf_run = WorkflowRun.objects.get()
    assert run_command("cancel", str(wf_run.pk)) == f"Workflow run {wf_run.pk} cancelled.\n"
    assert "already cancelled" in run_command("cancel", str(wf_run.pk))
    assert f"re-runs {wf_run.pk}" in run_command("rerun", str(wf_run.pk))
    with pytest.raises(CommandError, match="already re-run"):
        run_command("rerun", str(wf_run.pk))


def test_unknown_names_are_clear_errors(diamond):
    with pytest.raises(CommandError, match="No workflow named 'nope'"):
        run_command("run", "nope")
