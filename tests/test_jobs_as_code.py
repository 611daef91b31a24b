"""manage.py jobs export / jobs apply: jobs kept in a YAML or JSON file."""

import json
import os
import subprocess
import sys
from dataclasses import dataclass, replace
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from jobs.as_code import files as as_code
from jobs.definitions.jobs import save_job
from jobs.models import Job

from .conftest import REPO, database_url
from .test_api_jobs_as_code import laughs

pytestmark = pytest.mark.django_db


def make_job(name, schedule, **fields):
    fields.setdefault("kind", "callable")
    fields.setdefault("target", "builtin.noop")
    return save_job(Job(name=name, **fields), schedule)


def run_command(*args):
    out = StringIO()
    call_command("jobs", *args, stdout=out)
    return out.getvalue()


def make_jobs_of_every_kind():
    make_job("nightly-report", {"type": "cron", "cron": "30 2 * * *", "timezone": "Europe/Berlin"},
             description="The report.\n  Sent at night. ", tags=["reports", "daily"],
             kwargs={"to": "ops", "format": {"b": 1, "a": [1, 2]}}, max_retries=3,
             retry_backoff_seconds=30, sla_seconds=600, catchup_policy="all", catchup_max=5)
    make_job("poller", {"type": "interval", "every_seconds": 45}, args=[1, "two"], enabled=False,
             overlap_policy="skip", jitter_seconds=5, start_deadline_seconds=60, queue="fast")
    make_job("cleanup", {"type": "cron", "cron": "*/15 * * * *", "timezone": "UTC"}, kind="command",
             target="echo cleaning", environment={"MODE": "full"}, timeout_seconds=120)
    make_job("ping", {"type": "once", "run_at": "2031-05-04T03:02:01+00:00"}, kind="http",
             target="https://health.example.invalid/health", http_method="POST", http_headers={"X-Token": "t"},
             http_body='{\n  "ok": true\n}\n', http_ok_statuses=[200, 204], retry_jitter=False)
    make_job("by-hand", {"type": "manual"})


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


NIGHTLY_YAML = """\
jobs:
- name: hourly
  kind: callable
  target: builtin.noop
  schedule:
    type: interval
    every_seconds: 3600
- name: weekly
  kind: callable
  target: builtin.noop
  schedule: {type: cron, cron: '0 9 * * 1', timezone: UTC}
"""


def test_it_round_trips_every_kind_and_schedule_byte_for_byte(tmp_path, settings):
    settings.JOBS_QUEUES = {"jobs": None, "fast": None}  # the poller's queue is one of the service's
    make_jobs_of_every_kind()
    first = str(tmp_path / "jobs.yaml")
    run_command("export", first)
    Job.objects.all().delete()

    output = run_command("apply", first)
    second = str(tmp_path / "again.yaml")
    run_command("export", second)

    assert "+ create nightly-report" in output and "applied: 5 created, 0 updated, 0 deleted." in output
    text = Path(first).read_text()
    assert Path(second).read_text() == text
    # Defaults are left out; the required keys are always there.
    assert text.index("name: by-hand") < text.index("name: cleanup") < text.index("name: nightly-report")
    by_hand = text[text.index("- name: by-hand"):text.index("- name: cleanup")]
    assert by_hand.split() == ["-", "name:", "by-hand", "kind:", "callable", "target:", "builtin.noop",
                               "schedule:", "type:", "manual"]
    assert Job.objects.get(name="ping").http_body == '{\n  "ok": true\n}\n'
    poller = Job.objects.get(name="poller")
    assert (poller.enabled, poller.overlap_policy, poller.jitter_seconds, poller.args) == (False, "skip", 5, [1, "two"])


def test_it_changes_nothing_when_the_file_is_applied_again(tmp_path):
    make_jobs_of_every_kind()
    path = str(tmp_path / "jobs.yml")
    run_command("export", path)
    before = {job.name: (job.updated_at, job.next_run_at) for job in Job.objects.all()}

    output = run_command("apply", path)

    assert output.splitlines() == ["= unchanged: 5", "no changes"]
    assert {job.name: (job.updated_at, job.next_run_at) for job in Job.objects.all()} == before


def test_it_prints_the_plan_and_saves_nothing_on_a_dry_run(tmp_path):
    make_job("hourly", {"type": "interval", "every_seconds": 60})
    make_job("stale", {"type": "manual"})
    path = write(tmp_path, "jobs.yaml", NIGHTLY_YAML)

    output = run_command("apply", path, "--dry-run", "--prune")

    assert output.splitlines() == [
        "~ update hourly: schedule: "
        '{"type": "interval", "every_seconds": 60} -> {"type": "interval", "every_seconds": 3600}',
        "+ create weekly",
        "- delete stale",
        "= unchanged: 0",
        "dry run: the plan is valid; nothing was saved.",
    ]
    assert sorted(Job.objects.values_list("name", flat=True)) == ["hourly", "stale"]
    assert Job.objects.get(name="hourly").every_seconds == 60


def test_it_deletes_jobs_missing_from_the_file_only_with_prune(tmp_path):
    make_job("stale", {"type": "manual"})
    path = write(tmp_path, "jobs.yaml", NIGHTLY_YAML)

    kept = run_command("apply", path)
    assert "- delete" not in kept
    assert sorted(Job.objects.values_list("name", flat=True)) == ["hourly", "stale", "weekly"]

    pruned = run_command("apply", path, "--prune")
    assert pruned.splitlines() == ["- delete stale", "= unchanged: 2", "applied: 0 created, 0 updated, 1 deleted."]
    assert sorted(Job.objects.values_list("name", flat=True)) == ["hourly", "weekly"]


def test_it_updates_changed_fields_and_resets_omitted_ones_to_their_default(tmp_path):
    make_job("hourly", {"type": "interval", "every_seconds": 3600}, max_retries=4, description="old")
    next_run_at = Job.objects.get(name="hourly").next_run_at
    path = write(tmp_path, "jobs.yaml", NIGHTLY_YAML.replace("target: builtin.noop\n", "target: builtin.noop\n"
                                                              "  timeout_seconds: 60\n", 1))

    output = run_command("apply", path)

    assert '~ update hourly: description: "old" -> "", max_retries: 4 -> 0, timeout_seconds: 3600 -> 60' in output
    job = Job.objects.get(name="hourly")
    assert (job.description, job.max_retries, job.timeout_seconds) == ("", 0, 60)
    assert job.next_run_at == next_run_at  # the schedule did not change


def test_it_rejects_an_invalid_cron_naming_the_job_the_key_and_the_line(tmp_path):
    path = write(tmp_path, "jobs.yaml", NIGHTLY_YAML + """\
- name: nightly
  kind: callable
  target: builtin.noop
  schedule: {type: cron, cron: '61 * * * *'}
""")

    with pytest.raises(CommandError) as error:
        run_command("apply", path)

    assert "line 12: jobs[2] (name: nightly): schedule.cron: '61 * * * *' is not a valid cron expression." in str(
        error.value)
    assert "nothing was applied" in str(error.value)
    assert not Job.objects.exists()


def test_it_saves_nothing_when_a_job_fails_validation_on_save(tmp_path):
    path = write(tmp_path, "jobs.yaml", NIGHTLY_YAML.replace("builtin.noop", "no.such.function", 2)
                 .replace("no.such.function", "builtin.noop", 1))

    with pytest.raises(CommandError) as error:
        run_command("apply", path)

    assert "line 8: jobs[1] (name: weekly): target: No registered function named 'no.such.function'" in str(
        error.value)
    assert not Job.objects.exists()


def test_it_rejects_unknown_keys_and_duplicate_names(tmp_path):
    path = write(tmp_path, "jobs.yaml", NIGHTLY_YAML.replace("  kind: callable\n", "  kind: callable\n  colour: red\n", 1)
                 + "- {name: hourly, kind: callable, target: builtin.noop}\n")

    with pytest.raises(CommandError) as error:
        run_command("apply", path)

    message = str(error.value)
    assert "line 2: jobs[0] (name: hourly): unknown key 'colour'." in message
    assert "line 13: jobs[2] (name: hourly): duplicate name" in message
    assert not Job.objects.exists()


def test_it_rejects_text_postgresql_cannot_store(tmp_path):
    path = write(tmp_path, "jobs.json", json.dumps({"jobs": [
        {"name": "hourly", "kind": "callable", "target": "builtin.noop", "kwargs": {"to": "a\u0000b"}}]}))

    with pytest.raises(CommandError) as error:
        run_command("apply", path)

    assert "jobs[0] (name: hourly): kwargs: Must not contain NUL" in str(error.value)
    assert not Job.objects.exists()


def test_it_exports_and_applies_json(tmp_path):
    make_jobs_of_every_kind()
    path = str(tmp_path / "jobs.json")
    run_command("export", path)
    document = json.loads(Path(path).read_text())
    assert [job["name"] for job in document["jobs"]] == ["by-hand", "cleanup", "nightly-report", "ping", "poller"]
    assert document["jobs"][3]["schedule"] == {"type": "once", "run_at": "2031-05-04T03:02:01+00:00"}
    assert list(document["jobs"][2]) == [
        "name", "description", "tags", "kind", "target", "kwargs", "schedule", "catchup_policy", "catchup_max",
        "max_retries", "retry_backoff_seconds", "sla_seconds"]

    document["jobs"][1]["schedule"]["cron"] = "0 * * * *"
    Path(path).write_text(json.dumps(document))
    output = run_command("apply", path)

    assert output.splitlines()[0] == (
        '~ update cleanup: schedule: {"type": "cron", "cron": "*/15 * * * *", "timezone": "UTC"} -> '
        '{"type": "cron", "cron": "0 * * * *", "timezone": "UTC"}')
    assert Job.objects.get(name="cleanup").cron_expression == "0 * * * *"
    assert run_command("export", "-") == run_command("export", "-")


def test_a_file_and_the_api_give_the_same_messages_for_the_same_job(tmp_path, admin_user):
    bad = {"name": "bad", "kind": "shell", "target": "builtin.noop", "max_retries": "many",
           "schedule": {"type": "interval", "every_seconds": 0}}
    incomplete = {"name": "incomplete", "kind": "callable"}
    api = APIClient()
    api.force_authenticate(admin_user)
    answer = api.post("/api/jobs/", bad, format="json").json()
    missing = api.post("/api/jobs/", incomplete, format="json").json()

    with pytest.raises(CommandError) as error:
        run_command("apply", write(tmp_path, "jobs.json", json.dumps({"jobs": [bad, incomplete]})))

    lines = str(error.value).splitlines()[1:]
    assert sorted(lines) == [f"jobs[0] (name: bad): kind: {answer['kind'][0]}",
                             f"jobs[0] (name: bad): max_retries: {answer['max_retries'][0]}",
                             f"jobs[0] (name: bad): schedule.every_seconds: {answer['schedule']['every_seconds'][0]}",
                             f"jobs[1] (name: incomplete): target: {missing['target'][0]}"]
    assert answer["kind"] == ['"shell" is not a valid choice.']


def test_a_job_keeps_its_group_through_a_file(tmp_path):
    team = Group.objects.create(name="team")
    make_job("shared", {"type": "manual"}, group=team)
    path = str(tmp_path / "jobs.yaml")
    run_command("export", path)
    assert "  group: team\n" in Path(path).read_text()
    Job.objects.all().delete()

    # The command line acts as staff would: any group may be given.
    assert "applied: 1 created" in run_command("apply", path)
    assert Job.objects.get(name="shared").group == team
    unknown = Path(path).read_text().replace("group: team", "group: nobody")
    with pytest.raises(CommandError, match="jobs\\[0\\] \\(name: shared\\): group: Object with name=nobody does not"):
        run_command("apply", write(tmp_path, "other.yaml", unknown))


def test_it_names_the_keys_a_file_may_hold(tmp_path):
    with pytest.raises(CommandError) as error:
        run_command("apply", write(tmp_path, "jobs.yaml", "jobs: []\ncolour: red\n"))
    assert ("The file must hold the key jobs with a list, and may hold limits, calendars, windows, channels, rules, workflows with a list (unknown "
            "top-level keys: colour).") in str(error.value)


def test_a_registered_section_is_planned_and_saved_after_the_jobs_and_pruned_before_them(tmp_path, monkeypatch):
    calls = []

    @dataclass
    class NotesPlan:
        notes: list

        is_empty = False

        def lines(self):
            return [f"+ note {note}" for note in self.notes]

        def counts(self):
            return len(self.notes), 0, 0

    def plan(entries, actor, prune, earlier):
        calls.append(("plan notes", sorted(earlier["jobs"].names_after)))
        return NotesPlan([entry.data for entry in entries]), [f"{e.where}: empty" for e in entries if not e.data]

    def apply(section_plan, actor):
        calls.append(("apply notes", Job.objects.count()))
        return ["notes: refused"] if "refuse" in section_plan.notes else []

    def logged(name, function):
        def call(*args):
            calls.append((name,))
            return function(*args)
        return call

    jobs = as_code.sections()["jobs"]  # every app's sections imported: none registers into the dict below
    monkeypatch.setattr(as_code, "SECTIONS", {
        "jobs": replace(jobs, apply=logged("apply jobs", jobs.apply), delete=logged("delete jobs", jobs.delete)),
        "notes": as_code.Section("notes", export=lambda actor: ["exported"], plan=plan, apply=apply,
                                 delete=logged("delete notes", lambda plan, actor: [])),
    })
    make_job("old", {"type": "manual"})

    output = run_command("apply", write(tmp_path, "jobs.yaml", NIGHTLY_YAML + "notes:\n- hello\n"), "--prune")

    assert calls == [("plan notes", ["hourly", "weekly"]), ("apply jobs",), ("apply notes", 3), ("delete notes",),
                     ("delete jobs",)]
    assert output.splitlines()[-3:] == ["= unchanged: 0", "+ note hello", "applied: 3 created, 0 updated, 1 deleted."]
    assert run_command("export", "-").endswith("notes:\n- exported\n")

    with pytest.raises(CommandError) as error:  # one transaction over every section
        run_command("apply", write(tmp_path, "again.yaml", NIGHTLY_YAML.replace("hourly", "daily") + "notes:\n- refuse\n"))
    assert "notes: refused" in str(error.value)
    assert sorted(Job.objects.values_list("name", flat=True)) == ["hourly", "weekly"]
    with pytest.raises(CommandError, match="line 13: notes\\[0\\]: empty"):
        run_command("apply", write(tmp_path, "empty.yaml", NIGHTLY_YAML + "notes:\n- ''\n"))


def manage_apply(path):
    """``manage.py jobs apply`` as an operator runs it: its own process, bounded in time."""
    env = {**os.environ, "DATABASE_URL": database_url(), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "manage.py", "jobs", "apply", path], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("section, field", [("jobs", "kwargs"), ("channels", "config"), ("workflows", "nodes")])
def test_apply_refuses_a_billion_laughs_at_once_with_the_line_of_the_first_alias(tmp_path, transactional_db,
                                                                                section, field):
    text = laughs(section, field)
    first_alias_line = next(n for n, line in enumerate(text.splitlines(), 1) if "*a" in line)

    done = manage_apply(write(tmp_path, "laughs.yaml", text))

    assert done.returncode != 0
    assert f"line {first_alias_line}: the alias *a is not accepted: write the value out in full" in done.stderr
    assert "Traceback" not in done.stderr
    assert not Job.objects.exists()


def test_apply_refuses_values_nested_deeper_than_a_hundred_levels(tmp_path, transactional_db):
    deep = "jobs:\n- name: deep\n  kind: callable\n  target: builtin.noop\n  kwargs:\n    x: " + "[" * 100_000 + "]" * 100_000

    done = manage_apply(write(tmp_path, "deep.yaml", deep))

    assert done.returncode == 1  # not a crash
    assert "line 6: values nest deeper than 100 levels; this file is not accepted." in done.stderr
    assert not Job.objects.exists()
