"""A job's versions: every saved change (the API, the pages, jobs files, a clone) is the next
version (GET /api/jobs/<id>/versions/, /versions/<n>/ with ?against=<m> for a diff); a restore
(POST /api/jobs/<id>/versions/<n>/restore/) is audited and is itself a new version; each run names
the version of its job it was made from (``job_version``); version 0, a missing one, another
team's job are 404s; secret values are never kept."""

import getpass
import re
import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import Action, AuditEntry
from jobs import lifecycle
from jobs.actions import jobs as actions
from jobs.models import Job, JobRun, JobVersion, Limit, RunStatus

from .api_personas import browser

pytestmark = pytest.mark.django_db

NEW = {"name": "versioned", "kind": "callable", "target": "builtin.noop", "schedule": {"type": "manual"},
       "max_retries": 1, "tags": ["a"]}


def create(api):
    answer = api.post("/api/jobs/", NEW, format="json")
    assert answer.status_code == 201, answer.json()
    return Job.objects.get(pk=answer.json()["id"])


def test_each_saved_change_is_a_version_with_its_number_author_time_and_changes(people):
    api = people.client(people.owner)
    before = timezone.now()
    job = create(api)
    assert api.patch(f"/api/jobs/{job.pk}/", {"max_retries": 3}, format="json").status_code == 200
    assert api.patch(f"/api/jobs/{job.pk}/", {"max_retries": 3}, format="json").status_code == 200  # no change
    assert api.patch(f"/api/jobs/{job.pk}/", {"tags": ["a", "b"], "timeout_seconds": 60}, format="json").status_code == 200

    listed = api.get(f"/api/jobs/{job.pk}/versions/").json()

    assert listed["count"] == 3
    assert [(v["version"], v["author"]) for v in listed["results"]] == [(3, "owner"), (2, "owner"), (1, "owner")]
    assert listed["results"][1]["changes"] == {"max_retries": [1, 3]}
    assert listed["results"][0]["changes"] == {"tags": [["a"], ["a", "b"]], "timeout_seconds": [3600, 60]}
    assert listed["results"][2]["changes"]["name"] == [None, "versioned"]
    assert all(before <= timezone.datetime.fromisoformat(v["created_at"]) <= timezone.now() for v in listed["results"])
    one = api.get(f"/api/jobs/{job.pk}/versions/2/").json()
    assert (one["version"], one["changes"], one["values"]["max_retries"], one["values"]["tags"]) == (
        2, {"max_retries": [1, 3]}, 3, ["a"])
    against = api.get(f"/api/jobs/{job.pk}/versions/3/?against=1").json()
    assert against["diff"] == {"max_retries": [1, 3], "tags": [["a"], ["a", "b"]], "timeout_seconds": [3600, 60]}
    assert Job.objects.get(pk=job.pk).version == 3


def test_a_restore_is_audited_and_is_a_new_version_of_what_the_old_one_was(people):
    api = people.client(people.owner)
    job = create(api)
    api.patch(f"/api/jobs/{job.pk}/", {"max_retries": 4, "target": "builtin.echo", "enabled": False}, format="json")

    restored = api.post(f"/api/jobs/{job.pk}/versions/1/restore/")

    assert restored.status_code == 201, restored.json()
    assert (restored.json()["version"], restored.json()["detail"]) == (3, "restored version 1")
    assert restored.json()["changes"] == {"max_retries": [4, 1], "target": ["builtin.echo", "builtin.noop"]}
    job.refresh_from_db()
    assert (job.max_retries, job.target, job.enabled, job.version) == (1, "builtin.noop", False, 3)  # still paused
    entry = AuditEntry.objects.filter(job=job, action=Action.CHANGE).latest("id")
    assert (entry.actor, entry.detail, entry.changes["max_retries"]) == (people.owner, "restored version 1", [4, 1])
    # Every field came back as version 1 had it, but whether the job is enabled.
    assert api.get(f"/api/jobs/{job.pk}/versions/3/?against=1").json()["diff"] == {"enabled": [True, False]}
    again = api.post(f"/api/jobs/{job.pk}/versions/1/restore/")
    assert again.status_code == 200 and again.json()["version"] == 3
    assert JobVersion.objects.filter(job=job).count() == 3


def versions_404s(people, api_path, page_path):
    """The 404s of the versions of a job or a workflow (``api_path``: its API's address, ``page_path``
    its page's, at version 1 only): version 0, a missing one, and every call of another team's user."""
    api, outsider = people.client(people.owner), people.client(people.outsider)
    for path in (f"{api_path}/versions/0/", f"{api_path}/versions/2/", f"{api_path}/versions/99999999999/",
                 f"{api_path}/versions/-1/", f"{api_path}/versions/1/?against=7"):
        assert api.get(path).status_code == 404, path
    for number in (0, 2):
        assert api.post(f"{api_path}/versions/{number}/restore/").status_code == 404
        assert browser(people.owner).post(f"{page_path}/versions/{number}/restore/").status_code == 404
    for path in (f"{api_path}/versions/", f"{api_path}/versions/1/", f"{api_path}/versions/1/?against=1"):
        assert outsider.get(path).status_code == 404, path
    assert outsider.post(f"{api_path}/versions/1/restore/").status_code == 404
    assert browser(people.outsider).post(f"{page_path}/versions/1/restore/").status_code == 404
    assert browser(people.outsider).get(f"{page_path}/?version=1&against=1").status_code == 404
    assert api.get(f"{api_path}/versions/1/?against=x").status_code == 400


def test_version_0_a_missing_version_and_another_teams_job_are_404s(people):
    job = create(people.client(people.owner))

    versions_404s(people, f"/api/jobs/{job.pk}", f"/jobs/{job.pk}")

    assert JobVersion.objects.filter(job=job).count() == 1


def test_a_version_never_keeps_secret_values_and_shows_private_ones_by_their_keys(people):
    api = people.client(people.runner)
    created = api.post("/api/jobs/", {"name": "cmd", "kind": "command", "target": "echo hi", "schedule": {"type": "manual"},
                                      "environment": {"MODE": "fast"}, "secret_environment": {"TOKEN": "s3cret"}},
                       format="json")
    assert created.status_code == 201, created.json()
    job = Job.objects.get(name="cmd")
    api.patch(f"/api/jobs/{job.pk}/", {"environment": {"MODE": "slow"}}, format="json")

    stored = JobVersion.objects.filter(job=job)
    one = api.get(f"/api/jobs/{job.pk}/versions/2/").json()

    assert all("secret_environment" not in version.values for version in stored)
    assert "s3cret" not in str(list(stored.values_list("values", "changes")))
    assert one["values"]["environment"] == {"MODE": "•••"} and "slow" not in str(one)
    assert one["changes"] == {"environment": [{"MODE": "•••"}, {"MODE": "••• (changed)"}]}
    restored = api.post(f"/api/jobs/{job.pk}/versions/1/restore/")
    assert restored.status_code == 201
    job.refresh_from_db()
    assert job.environment == {"MODE": "fast"} and job.secret_environment  # the secret kept as it was


def test_a_run_names_the_version_of_its_job_it_was_made_from(people):
    api = people.client(people.owner)
    job = create(api)
    first = api.post(f"/api/jobs/{job.pk}/run/", {}, format="json").json()
    api.patch(f"/api/jobs/{job.pk}/", {"max_retries": 2}, format="json")
    job.refresh_from_db()
    [(scheduled, *_)] = lifecycle.create_runs([(job, timezone.now() - timedelta(minutes=1), RunStatus.QUEUED, "", None)],
                                              timezone.now())
    day_ago = timezone.now() - timedelta(days=1)
    old = JobRun.objects.create(job=job, scheduled_for=day_ago, created_at=day_ago)  # made before versions

    assert first["job_version"] == 1
    assert api.get(f"/api/runs/{scheduled}/").json()["job_version"] == 2
    assert api.get(f"/api/runs/{old.pk}/").json()["job_version"] is None
    assert [run["job_version"] for run in api.get(f"/api/runs/?job={job.pk}").json()["results"]] == [2, 1, None]
    page = browser(people.owner).get(f"/runs/{first['id']}/").content.decode()
    assert "job version 1" in page and "?version=1&amp;against=2#versions" in page


def test_jobs_files_and_clones_make_versions_too(people):
    staff = people.client(people.staff)
    text = "jobs:\n- name: filed\n  kind: callable\n  target: builtin.noop\n  schedule: {type: manual}\n"
    assert staff.post("/api/jobs-as-code/", {"text": text}, format="json").json()["applied"] is True
    staff.post("/api/jobs-as-code/", {"text": text + "  max_retries: 2\n"}, format="json")
    filed = Job.objects.get(name="filed")

    clone = browser(people.staff).post(f"/jobs/{filed.pk}/clone/")

    assert clone.status_code == 302
    assert [v["changes"].get("max_retries") for v in staff.get(f"/api/jobs/{filed.pk}/versions/").json()["results"]] \
        == [[0, 2], [None, 0]]
    copy = Job.objects.get(name="filed (copy)")
    assert (copy.version, copy.versions.get().detail) == (1, "cloned from filed")


def test_the_job_page_lists_the_versions_shows_a_diff_and_restores(people):
    api = people.client(people.owner)
    job = create(api)
    api.patch(f"/api/jobs/{job.pk}/", {"max_retries": 5}, format="json")
    page = browser(people.owner)

    shown = page.get(f"/jobs/{job.pk}/?version=2&against=1").content.decode()
    missing = page.get(f"/jobs/{job.pk}/?version=2&against=9").content.decode()
    restored = page.post(f"/jobs/{job.pk}/versions/1/restore/", follow=True)

    assert 'id="versions"' in shown and "Now at version 2." in shown
    assert 'id="version-diff"' in shown and "<code>max_retries</code></td><td>1</td><td>5</td>" in shown
    assert "The job has no version 9." in missing
    assert restored.redirect_chain == [(f"/jobs/{job.pk}/", 302)]
    assert "Restored version 1: the job is now at version 3." in restored.content.decode()
    assert Job.objects.get(pk=job.pk).max_retries == 1
    assert page.get(f"/jobs/{job.pk}/versions/1/restore/").status_code == 405


def test_a_version_saved_on_the_command_line_names_no_os_user_nor_host(people):
    job = actions.create(actions.Actor.command_line(), Job(name="from-cli", kind="callable", target="builtin.noop",
                                                           owner=people.owner), {"type": "manual"})
    actions.edit(actions.Actor.command_line(people.owner), job, {"max_retries": 2})

    answer = people.client(people.owner).get(f"/api/jobs/{job.pk}/versions/").json()

    assert [v["author"] for v in answer["results"]] == ["owner", "an operator"]
    section = browser(people.owner).get(f"/jobs/{job.pk}/").content.decode().split('id="versions"')[1]
    shown = re.sub(r'<input type="hidden" name="csrfmiddlewaretoken" value="[^"]*">', "",
                   section.split("Audit trail")[0])  # a random token may hold a short host name
    for text in (str(answer), shown):
        assert getpass.getuser() not in text and socket.gethostname() not in text


def test_a_restore_the_actor_may_not_make_is_refused_and_changes_nothing(people):
    mine = Limit.objects.create(key="mine", max_running=1, owner=people.owner, shared=False)
    api = people.client(people.owner)
    job = create(api)
    assert api.patch(f"/api/jobs/{job.pk}/", {"limit_key": "mine"}, format="json").status_code == 200
    assert api.patch(f"/api/jobs/{job.pk}/", {"limit_key": ""}, format="json").status_code == 200
    mine.owner = people.outsider  # the limit is someone else's now: naming it again is not the owner's to do
    mine.save()

    refused = api.post(f"/api/jobs/{job.pk}/versions/2/restore/")

    assert refused.status_code == 400 and "limit_key" in refused.json(), refused.json()
    job.refresh_from_db()
    assert (job.limit_key, job.version, job.versions.count()) == ("", 3, 3)
