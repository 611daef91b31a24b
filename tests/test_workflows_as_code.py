"""manage.py jobs export / apply with ``workflows:`` next to ``jobs:``."""

import pytest
from django.core.management import CommandError

from jobs.models import Job
from workflows.models import Workflow

from .conftest import command_output

pytestmark = pytest.mark.django_db

FILE = """\
jobs:
- name: extract
  kind: callable
  target: builtin.noop
  schedule:
    type: manual
- name: load
  kind: callable
  target: builtin.noop
  schedule:
    type: manual
workflows:
- name: etl
  description: Nightly ETL.
  on_upstream_failure: run
  schedule:
    type: cron
    cron: 0 2 * * *
    timezone: Europe/Berlin
  nodes:
  - extract
  - load
  edges:
  - from: extract
    to: load
"""


def write(tmp_path, text, name="jobs.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_it_creates_jobs_and_a_workflow_that_uses_them_and_exports_it_back(tmp_path):
    output = command_output("jobs", "apply", write(tmp_path, FILE))
    assert "+ create workflow etl" in output
    workflow = Workflow.objects.get()
    assert (workflow.description, workflow.on_upstream_failure) == ("Nightly ETL.", "run")
    assert workflow.next_run_at is not None
    nodes, edges = workflow.graph()
    assert nodes == ["extract", "load"] and [e.as_dict() for e in edges] == [{"from": "extract", "to": "load"}]
    assert command_output("jobs", "export", "-") == FILE


def test_it_changes_nothing_when_applied_again(tmp_path):
    path = write(tmp_path, FILE)
    command_output("jobs", "apply", path)
    next_run_at = Workflow.objects.get().next_run_at
    assert command_output("jobs", "apply", path).splitlines()[-1] == "no changes"
    assert Workflow.objects.get().next_run_at == next_run_at


def test_it_rejects_a_cycle_naming_the_workflow_the_key_and_the_line(tmp_path):
    path = write(tmp_path, FILE + "  - from: load\n    to: extract\n")
    with pytest.raises(CommandError) as error:
        command_output("jobs", "apply", path)
    assert "line 13: workflows[0] (name: etl): edges: cycle: extract → load → extract" in str(error.value)
    assert not Job.objects.exists() and not Workflow.objects.exists()


def test_it_rejects_unknown_jobs_and_keys(tmp_path):
    path = write(tmp_path, FILE.replace("  - load\n", "  - load\n  - missing\n").replace(
        "  description:", "  colour: red\n  description:"))
    with pytest.raises(CommandError) as error:
        command_output("jobs", "apply", path)
    assert "workflows[0] (name: etl): unknown key 'colour'." in str(error.value)
    assert "workflows[0] (name: etl): nodes: No job named 'missing' that you may use." in str(error.value)


def test_a_dry_run_saves_nothing(tmp_path):
    output = command_output("jobs", "apply", write(tmp_path, FILE), "--dry-run")
    assert "+ create workflow etl" in output and "dry run" in output
    assert not Workflow.objects.exists()


def test_prune_deletes_workflows_missing_from_the_file_and_refuses_jobs_still_used(tmp_path):
    command_output("jobs", "apply", write(tmp_path, FILE))
    jobs_only = FILE.split("workflows:")[0]
    with pytest.raises(CommandError) as error:  # without a workflows key, workflows are left alone
        command_output("jobs", "apply", write(tmp_path, "jobs: []\n", "empty.yaml"), "--prune")
    assert "jobs: - delete extract: The job extract is used by the workflow(s) etl: remove it from them first." in str(
        error.value)
    output = command_output("jobs", "apply", write(tmp_path, jobs_only + "workflows: []\n", "none.yaml"), "--prune")
    assert "- delete workflow etl" in output
    assert not Workflow.objects.exists() and Job.objects.count() == 2
