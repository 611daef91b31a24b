"""manage.py workflows: list, show, run, re-run, cancel."""

import pytest
from django.core.management import CommandError

from workflows.models import WorkflowRun

from .conftest import command_output
from .workflow_helpers import make_job, make_workflow

pytestmark = pytest.mark.django_db


@pytest.fixture
def diamond():
    for name in "abcd":
        make_job(name)
    return make_workflow("diamond", "abcd", [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])


def test_list_and_show(diamond):
    assert "diamond  4     Manual only" in command_output("workflows", "list")
    shown = command_output("workflows", "show", "diamond")
    assert "  0: a\n  1: b, c\n  2: d\n" in shown
    assert "  b → d\n" in shown


def test_run_then_cancel_then_rerun(diamond):
    assert command_output("workflows", "run", "diamond").startswith("Workflow run ")
    wf_run = WorkflowRun.objects.get()
    assert command_output("workflows", "cancel", str(wf_run.pk)) == f"Workflow run {wf_run.pk} cancelled.\n"
    assert "already cancelled" in command_output("workflows", "cancel", str(wf_run.pk))
    assert f"re-runs {wf_run.pk}" in command_output("workflows", "rerun", str(wf_run.pk))
    with pytest.raises(CommandError, match="already re-run"):
        command_output("workflows", "rerun", str(wf_run.pk))


def test_unknown_names_are_clear_errors(diamond):
    with pytest.raises(CommandError, match="No workflow named 'nope'"):
        command_output("workflows", "run", "nope")
