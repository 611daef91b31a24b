"""Jobs as code through the API: POST /api/jobs-as-code/ (plan, dry run, apply, prune, errors with
entry, job, key and line) and GET for the export; who may apply, and to which jobs."""

import gc

import pytest
import yaml
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from audit.models import AuditEntry
from jobs.as_code import files as as_code
from jobs.definitions import jobs as definitions
from jobs.definitions.jobs import save_job
from jobs.models import Job
from workflows.models import Workflow

from .collector_spy import note_collector

pytestmark = pytest.mark.django_db

FILE = """\
jobs:
- name: hourly
  kind: callable
  target: builtin.noop
  schedule: {type: interval, every_seconds: 3600}
- name: weekly
  kind: callable
  target: builtin.noop
  max_retries: 2
  schedule: {type: cron, cron: '0 9 * * 1', timezone: UTC}
"""


def apply(client, text, **options):
    return client.post("/api/jobs-as-code/", {"text": text, **options}, format="json")


def may_apply(user):
    user.user_permissions.add(Permission.objects.get(codename="add_job", content_type__app_label="jobs"))
    return user


def test_a_dry_run_answers_the_plan_and_saves_nothing(people):
    response = apply(people.client(people.staff), FILE, dry_run=True)
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["dry_run"] is True and body["applied"] is False
    assert body["changes"] == [{"action": "create", "job": "hourly", "changes": []},
                               {"action": "create", "job": "weekly", "changes": []}]
    assert body["plan"] == ["+ create hourly", "+ create weekly", "= unchanged: 0"]
    assert set(Job.objects.values_list("name", flat=True)) == {"nightly-report"}


def test_staff_apply_then_a_second_apply_changes_nothing(people):
    staff = people.client(people.staff)
    first = apply(staff, FILE)
    assert first.json()["applied"] is True
    weekly = Job.objects.get(name="weekly")
    assert (weekly.max_retries, weekly.owner) == (2, people.staff)
    # One entry for the jobs an apply creates, naming them.
    assert AuditEntry.objects.get(action="create", source="api", actor=people.staff).changes == {
        "created": ["hourly", "weekly"]}
    next_run = weekly.next_run_at
    second = apply(staff, FILE).json()
    assert second["applied"] is False and second["changes"] == [] and second["unchanged"] == 2
    weekly.refresh_from_db()
    assert weekly.next_run_at == next_run


def test_the_collector_is_paused_while_a_posted_file_is_planned_and_saved_and_runs_again_after(people, monkeypatch):
    # jobs.collector: its full passes walk every entry and job a large file keeps alive.
    running = {}
    note_collector(monkeypatch, running, as_code.EntryChecker, "check", "plan")
    note_collector(monkeypatch, running, definitions, "save_jobs", "save")

    assert apply(people.client(people.staff), FILE).json()["applied"] is True
    assert running == {"plan": False, "save": False}
    assert gc.isenabled()


def test_an_update_lists_each_changed_field(people):
    staff = people.client(people.staff)
    apply(staff, FILE)
    changed = apply(staff, FILE.replace("max_retries: 2", "max_retries: 5"), dry_run=True).json()
    assert changed["changes"] == [{"action": "update", "job": "weekly",
                                   "changes": [{"key": "max_retries", "old": 2, "new": 5}]}]
    assert changed["plan"][0] == "~ update weekly: max_retries: 2 -> 5"
    assert Job.objects.get(name="weekly").max_retries == 2


def test_prune_deletes_the_jobs_missing_from_the_file(people):
    response = apply(people.client(people.staff), FILE, prune=True)
    assert response.json()["changes"][-1] == {"action": "delete", "job": "nightly-report", "changes": []}
    assert set(Job.objects.values_list("name", flat=True)) == {"hourly", "weekly"}


def test_errors_name_the_entry_the_job_the_key_and_the_line(people):
    bad = FILE.replace("'0 9 * * 1'", "'61 * * * *'").replace("max_retries: 2", "max_retries: lots")
    response = apply(people.client(people.staff), bad)
    assert response.status_code == 400
    body = response.json()
    assert body["detail"] == "Nothing was applied: the file has errors."
    by_key = {error["key"]: error for error in body["errors"]}
    assert by_key["max_retries"]["line"] == 6
    assert by_key["max_retries"]["entry"] == "jobs[1]" and by_key["max_retries"]["job"] == "weekly"
    assert by_key["max_retries"]["text"].startswith("line 6: jobs[1] (name: weekly): max_retries: ")
    assert by_key["schedule.cron"]["line"] == 6
    assert "'61 * * * *'" in by_key["schedule.cron"]["message"]
    assert set(Job.objects.values_list("name", flat=True)) == {"nightly-report"}


@pytest.mark.parametrize(("body", "field"), [
    ({"text": FILE, "format": "toml"}, "format"),
    ({"format": "yaml"}, "text"),
    ({"text": FILE, "dry_run": "perhaps"}, "dry_run"),
])
def test_a_bad_request_gets_a_message_per_field(people, body, field):
    response = people.client(people.staff).post("/api/jobs-as-code/", body, format="json")
    assert response.status_code == 400 and field in response.json()


def test_a_file_that_is_not_jobs_is_refused_whole(people):
    response = apply(people.client(people.staff), "jobs: [unclosed")
    assert response.status_code == 400
    assert response.json()["errors"][0]["message"].startswith("Cannot read the file:")
    assert response.json()["errors"][0]["line"] is None


def test_json_files_apply_too(people):
    text = '{"jobs": [{"name": "j", "kind": "callable", "target": "builtin.noop"}]}'
    assert apply(people.client(people.staff), text, format="json").json()["plan"][0] == "+ create j"


def test_a_user_needs_the_permission_to_apply(people):
    response = apply(people.client(people.owner), FILE, dry_run=True)
    assert response.status_code == 403
    assert response.json() == {"detail": "Applying jobs as code needs staff or the jobs.add_job permission."}
    assert APIClient().post("/api/jobs-as-code/", {"text": FILE}, format="json").status_code == 401


def test_a_users_apply_touches_only_their_own_jobs(people):
    save_job(Job(name="outsiders-job", kind="callable", target="builtin.noop", owner=people.outsider),
             {"type": "manual"})
    client = people.client(may_apply(people.owner))
    response = apply(client, FILE, prune=True)
    assert response.status_code == 200, response.json()
    # Pruning removed the owner's own job and nobody else's.
    assert set(Job.objects.values_list("name", flat=True)) == {"hourly", "weekly", "outsiders-job"}
    assert set(Job.objects.filter(owner=people.owner).values_list("name", flat=True)) == {"hourly", "weekly"}

    taken = FILE.replace("name: hourly", "name: outsiders-job")
    refused = apply(client, taken, prune=True)
    assert refused.status_code == 400
    assert [e["text"] for e in refused.json()["errors"]] == [
        "line 2: jobs[0] (name: outsiders-job): name: job with this name already exists."]
    assert Job.objects.get(name="outsiders-job").owner == people.outsider


def test_a_user_without_the_command_permission_cannot_add_a_command_job(people):
    text = "jobs:\n- name: shell\n  kind: command\n  target: echo hi\n"
    response = apply(people.client(may_apply(people.owner)), text)
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["key"] == "kind" and error["job"] == "shell" and "command jobs" in error["message"].lower()
    assert not Job.objects.filter(name="shell").exists()
    assert apply(people.client(people.staff), text).status_code == 400  # staff alone is not enough
    assert apply(people.client(may_apply(people.runner)), text).status_code == 200  # run_command_jobs is


def test_workflows_in_a_file_are_for_staff(people):
    text = FILE + "workflows:\n- name: flow\n  nodes: [hourly, weekly]\n  edges: [{from: hourly, to: weekly}]\n"
    refused = apply(people.client(may_apply(people.owner)), text)
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["text"] == "workflows: only staff may apply workflows through the API."
    assert apply(people.client(people.staff), text).status_code == 200
    assert Workflow.objects.filter(name="flow").exists()


def test_the_export_holds_the_jobs_you_may_apply_to(people):
    save_job(Job(name="outsiders-job", kind="callable", target="builtin.noop", owner=people.outsider),
             {"type": "manual"})
    staff = people.client(people.staff).get("/api/jobs-as-code/").json()
    assert staff["format"] == "yaml" and staff["jobs"] == 2
    assert [job["name"] for job in yaml.safe_load(staff["text"])["jobs"]] == ["nightly-report", "outsiders-job"]
    mine = people.client(people.owner).get("/api/jobs-as-code/", {"file_format": "json"}).json()
    assert mine["format"] == "json" and mine["jobs"] == 1
    assert '"name": "nightly-report"' in mine["text"] and "outsiders-job" not in mine["text"]
    assert people.client(people.owner).get("/api/jobs-as-code/", {"file_format": "xml"}).status_code == 400


def test_an_exported_file_applies_back_with_no_changes(people):
    staff = people.client(people.staff)
    apply(staff, FILE)
    text = staff.get("/api/jobs-as-code/").json()["text"]
    assert apply(staff, text, prune=True).json()["changes"] == []


def test_files_up_to_two_megabytes_are_taken_and_larger_ones_refused(people):
    staff = people.client(people.staff)
    padding = "# " + "x" * 1000 + "\n"
    big = FILE + padding * 1500  # 1.5 MB: more than the API's usual 256 KB
    assert apply(staff, big, dry_run=True).status_code == 200
    too_big = apply(staff, FILE + padding * 2200)
    assert too_big.status_code == 413
    assert too_big.json() == {"detail": "The request body is larger than 2048 KB."}
    assert set(Job.objects.values_list("name", flat=True)) == {"nightly-report"}


def laughs(section, field):
    """A billion laughs: 531 bytes whose aliases of aliases expand to 9^9 (387,420,489) strings, in
    ``field`` of an entry of ``section``."""
    levels = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    levels += [f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]"
               for previous, name in zip("abcdefgh", "bcdefghi", strict=True)]
    return f"{section}:\n- name: laughs\n  kind: webhook\n  {field}:\n    bomb:\n" + "".join(
        f"      {level}\n" for level in levels)


@pytest.mark.timeout(60, method="thread")  # the old reader spent minutes and gigabytes on it
@pytest.mark.parametrize("section, field", [("jobs", "kwargs"), ("channels", "config"), ("workflows", "nodes")])
def test_a_billion_laughs_is_refused_at_once_naming_the_first_alias(people, section, field):
    text = laughs(section, field)
    assert len(text) < 600
    first_alias_line = next(n for n, line in enumerate(text.splitlines(), 1) if "*a" in line)

    response = apply(people.client(people.staff), text)

    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["line"] == first_alias_line and error["entry"] is None
    assert error["message"].startswith("the alias *a is not accepted: write the value out in full")
    assert set(Job.objects.values_list("name", flat=True)) == {"nightly-report"}


def test_values_nested_too_deep_are_refused_with_the_line(people):
    deep = "jobs:\n- name: deep\n  kind: callable\n  target: builtin.noop\n  kwargs:\n    x: " + "[" * 150 + "]" * 150 + "\n"

    response = apply(people.client(people.staff), deep)

    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["line"] == 6 and error["message"] == "values nest deeper than 100 levels; this file is not accepted."
    assert not Job.objects.filter(name="deep").exists()


def test_json_nested_too_deep_is_a_clear_error(people):
    response = apply(people.client(people.staff), '{"jobs": ' + "[" * 5000 + "]" * 5000 + "}", format="json")

    assert response.status_code == 400
    assert response.json()["errors"][0]["message"] == "Cannot read the file: it nests values too deeply."


def test_the_largest_file_taken_is_a_setting(people, settings):
    settings.JOBS_AS_CODE_MAX_BYTES = 1024 * 1024
    padding = "# " + "x" * 1000 + "\n"

    too_big = apply(people.client(people.staff), FILE + padding * 1100)  # 1.1 MB

    assert too_big.status_code == 413
    assert too_big.json() == {"detail": "The request body is larger than 1024 KB."}
    assert set(Job.objects.values_list("name", flat=True)) == {"nightly-report"}
