"""manage.py jobs apply of many jobs at once (the bulk path): the same jobs, schedule rows and
audit entries as job-by-job saving, idempotent, progress on stderr, and errors naming the entry."""

import gc
import json
from datetime import UTC, datetime, time, timedelta
from io import StringIO
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.db import DatabaseError
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule

from audit.models import Action
from jobs import kinds
from jobs.as_code import files as as_code
from jobs.definitions import jobs as definitions
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobVersion, TeamQuota

from .api_personas import make_personas
from .collector_spy import note_collector
from .file_entries import mixed_entry
from .work_trail import work_entries

pytestmark = pytest.mark.django_db

COUNT = 30


def entry(i, **changes):
    job = {"name": f"job-{i:02d}", "kind": "callable", "target": "builtin.noop"}
    if i % 3 == 0:
        job["schedule"] = {"type": "cron", "cron": f"{i % 2} 3 * * *", "timezone": "Europe/Berlin"}
    elif i % 3 == 1:
        job["schedule"] = {"type": "interval", "every_seconds": 60}
    if i % 4 == 0:
        job["tags"] = ["nightly"]
    return {**job, **changes}


def write(tmp_path, jobs, name="jobs.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"jobs": jobs}, sort_keys=False))
    return str(path)


def apply(path, *options, user=None):
    out, err = StringIO(), StringIO()
    call_command("jobs", *(["--as", user] if user else []), "apply", path, *options, stdout=out, stderr=err)
    return out.getvalue().splitlines(), err.getvalue().splitlines()


def state():
    return {job.name: (job.updated_at, job.next_run_at, job.max_retries) for job in Job.objects.all()}


def test_it_creates_every_job_with_its_schedule_rows_and_one_audit_entry(tmp_path):
    out, _ = apply(write(tmp_path, [entry(i) for i in range(COUNT)]))

    assert out[-1] == f"applied: {COUNT} created, 0 updated, 0 deleted."
    jobs = {job.name: job for job in Job.objects.select_related("crontab", "interval")}
    assert len(jobs) == COUNT
    # Schedule rows are shared, as get_or_create shares them: one per distinct schedule.
    assert CrontabSchedule.objects.filter(hour="3", timezone="Europe/Berlin").count() == 2
    assert jobs["job-03"].crontab_id == jobs["job-09"].crontab_id != jobs["job-06"].crontab_id
    assert jobs["job-03"].next_run_at == jobs["job-03"].upcoming_slots(1)[0]
    assert jobs["job-01"].next_run_at is not None and jobs["job-02"].next_run_at is None
    assert jobs["job-04"].tags == ["nightly"] and jobs["job-05"].tags == []
    # One entry for the jobs created, naming them (each job's values are its row).
    created = work_entries().get()
    assert (created.action, created.detail, created.source) == (Action.CREATE, f"jobs apply: {COUNT} job(s) created",
                                                                 "cli")
    assert created.changes == {"created": [f"job-{i:02d}" for i in range(COUNT)]}
    assert created.job_name.startswith("job-00, job-01, job-02")


def test_a_second_apply_changes_nothing_and_an_update_touches_only_the_changed_jobs(tmp_path):
    apply(write(tmp_path, [entry(i) for i in range(COUNT)]))
    before, entries = state(), work_entries().count()

    assert apply(write(tmp_path, [entry(i) for i in range(COUNT)]))[0] == [f"= unchanged: {COUNT}", "no changes"]
    assert state() == before and work_entries().count() == entries

    changed = [entry(i, max_retries=2) if i % 10 == 0 else entry(i) for i in range(COUNT)]
    changed[1]["schedule"] = {"type": "interval", "every_seconds": 120}
    out, _ = apply(write(tmp_path, changed))

    assert "~ update job-00: max_retries: 0 -> 2" in out and out[-1] == "applied: 0 created, 4 updated, 0 deleted."
    after = state()
    assert {name for name in after if after[name] != before[name]} == {"job-00", "job-01", "job-10", "job-20"}
    assert after["job-10"][1] == before["job-10"][1]  # its schedule did not change: nor did its next slot
    assert Job.objects.get(name="job-01").every_seconds == 120
    assert work_entries().get(action=Action.CHANGE, job__name="job-10").changes == {"max_retries": [0, 2]}


def test_prune_deletes_the_missing_jobs_with_an_audit_entry_each(tmp_path):
    apply(write(tmp_path, [entry(i) for i in range(COUNT)]))

    out, _ = apply(write(tmp_path, [entry(i) for i in range(COUNT - 5)]), "--prune")

    assert out[-1] == "applied: 0 created, 0 updated, 5 deleted."
    assert Job.objects.count() == COUNT - 5
    assert sorted(work_entries().filter(action=Action.DELETE).values_list("job_name", flat=True)) == [
        f"job-{i}" for i in range(COUNT - 5, COUNT)]


def test_a_long_apply_says_how_far_it_got_on_stderr(tmp_path, monkeypatch):
    monkeypatch.setattr(as_code, "PROGRESS_EVERY", 10)
    monkeypatch.setattr(as_code, "SAVE_CHUNK", 10)

    out, err = apply(write(tmp_path, [entry(i) for i in range(25)]))

    assert err == ["jobs checked: 10 of 25", "jobs checked: 20 of 25", "jobs checked: 25 of 25",
                   "jobs saved: 10 of 25", "jobs saved: 20 of 25", "jobs saved: 25 of 25"]
    assert out[-1] == "applied: 25 created, 0 updated, 0 deleted." and Job.objects.count() == 25


def test_an_error_on_save_names_the_entry_and_nothing_is_saved(tmp_path, monkeypatch):
    monkeypatch.setattr(as_code, "SAVE_CHUNK", 10)  # the bad job is in the second batch
    jobs = [entry(i) for i in range(COUNT)]
    jobs[14]["target"] = "no.such.function"

    path = write(tmp_path, jobs)

    with pytest.raises(CommandError) as error:
        apply(path)

    line = Path(path).read_text().splitlines().index("- name: job-14") + 1
    assert f"line {line}: jobs[14] (name: job-14): target: No registered function named 'no.such.function'" in str(
        error.value)
    assert not Job.objects.exists() and not work_entries().exists()


def test_a_users_file_cannot_take_the_name_of_a_job_they_do_not_see(tmp_path):
    get_user_model().objects.create_user("ann")
    save_job(Job(name="job-02", kind="callable", target="builtin.noop"))

    with pytest.raises(CommandError) as error:
        apply(write(tmp_path, [entry(i) for i in range(4)]), user="ann")

    assert "jobs[2] (name: job-02): name: job with this name already exists." in str(error.value)
    assert Job.objects.count() == 1


def test_when_the_database_refuses_the_bulk_save_the_one_by_one_path_applies_the_file(tmp_path, monkeypatch):
    def refused(items, *args, **kwargs):
        for job, _ in items:  # what a bulk insert leaves on the jobs before the database refuses
            job.pk = 10**6 + len(job.name)
        raise DatabaseError("value refused")

    monkeypatch.setattr(definitions, "save_jobs", refused)

    out, _ = apply(write(tmp_path, [entry(i) for i in range(3)]))

    assert out[-1] == "applied: 3 created, 0 updated, 0 deleted."
    assert sorted(Job.objects.values_list("name", flat=True)) == ["job-00", "job-01", "job-02"]
    assert work_entries().filter(action=Action.CREATE).count() == 3  # one each, by actions.create


LARGE = 20000
def large_entry(i):
    """Job ``i`` of a large file, some of them shared with the team."""
    job = mixed_entry(i, f"bulk-{i:05d}", "file")
    if i % 4 == 0:
        job["group"] = "team"
    return job


def expected_next_run(schedule, before, after):
    """The next slots a job could have been given between the test's clock readings ``before`` and
    ``after``: a cron job's next wall-clock H:M in its zone, an interval's first one ``every``
    from the moment of saving, a one-time job's moment."""
    if schedule["type"] == "cron":
        minute, hour = map(int, schedule["cron"].split()[:2])
        zone = ZoneInfo(schedule["timezone"])
        found = set()
        for moment in (before, after):
            local = moment.astimezone(zone)
            slot = datetime.combine(local.date(), time(hour, minute), zone)
            found.add((slot if slot > moment else slot + timedelta(days=1)).astimezone(UTC))
        return found
    if schedule["type"] == "once":
        return {datetime.fromisoformat(schedule["run_at"])}
    return None


ROW_FIELDS = [f.attname for f in Job._meta.concrete_fields if f.name not in ("id", "name", "created_at", "updated_at",
                                                                              "next_run_at")]


def rows(names):
    return {job.name: {key: getattr(job, key) for key in ROW_FIELDS} for job in Job.objects.filter(name__in=names)}


def test_a_large_file_gives_what_the_file_says_and_what_saving_job_by_job_gives(tmp_path, monkeypatch, settings):
    people = make_personas()
    people.owner.user_permissions.add(Permission.objects.get(codename="add_job", content_type__app_label="jobs"))
    entries = [large_entry(i) for i in range(LARGE)]
    in_team = sum(1 for job in entries if job.get("group") == "team")
    settings.JOBS_MAX_JOBS_PER_USER = LARGE + 1  # the owner has nightly-report: exactly at the quota
    TeamQuota.objects.create(group=people.team, max_jobs=in_team + 1)  # so has the team
    path = str(tmp_path / "large.json")
    Path(path).write_text(json.dumps({"jobs": entries}))

    before = timezone.now()
    out, _ = apply(path, user="owner")
    after = timezone.now()

    assert out[-1] == f"applied: {LARGE} created, 0 updated, 0 deleted."
    jobs = {job.name: job for job in Job.objects.exclude(pk=people.job.pk).select_related(
        "crontab", "interval", "clocked", "group", "owner")}
    assert len(jobs) == LARGE
    for given in entries:
        job, schedule = jobs[given["name"]], given["schedule"]
        assert (job.kind, job.target, job.owner, job.group) == (
            given["kind"], given["target"], people.owner, people.team if "group" in given else None)
        assert (job.tags, job.kwargs, job.http_method, job.http_headers) == (
            given.get("tags", []), given.get("kwargs", {}), given.get("http_method", "GET"), given.get("http_headers", {}))
        assert (job.max_retries, job.sla_seconds, job.enabled) == (given.get("max_retries", 0), given.get("sla_seconds"),
                                                                  True)
        assert job.schedule_type == schedule["type"]
        if schedule["type"] == "cron":
            assert (job.cron_expression, str(job.crontab.timezone)) == (schedule["cron"], schedule["timezone"])
            assert job.next_run_at in expected_next_run(schedule, before, after)
        elif schedule["type"] == "interval":
            assert job.every_seconds == schedule["every_seconds"]
            every = timedelta(seconds=schedule["every_seconds"])
            assert before + every <= job.next_run_at <= after + every
        elif schedule["type"] == "once":
            assert job.next_run_at in expected_next_run(schedule, before, after)
        else:
            assert job.next_run_at is None
    # An audit entry for each batch of jobs created (as_code.SAVE_CHUNK), naming each, by the owner.
    created = list(work_entries().filter(action=Action.CREATE).exclude(job=people.job).order_by("id"))
    assert {(entry.actor, entry.source) for entry in created} == {(people.owner, "cli")}
    assert [name for entry in created for name in entry.changes["created"]] == [given["name"] for given in entries]
    assert len(created) == LARGE // as_code.SAVE_CHUNK
    # A version 1 of each job, by the owner, its values the entry's and none of a secret field's.
    versions = {version.job_id: version for version in JobVersion.objects.filter(job__name__startswith="bulk-")}
    assert len(versions) == LARGE
    for given in entries:
        version = versions[jobs[given["name"]].pk]
        assert (version.number, version.author, version.author_name, version.changes) == (1, people.owner, "owner", {})
        assert (version.values["name"], version.values["target"], version.values["tags"],
                version.values["schedule"]["type"]) == (given["name"], given["target"], given.get("tags", []),
                                                        given["schedule"]["type"])
        assert not set(version.values) & kinds.secret_fields()

    # A sample of the same entries saved job by job (the path the bulk one falls back to) gives the
    # same rows, field for field.
    sample = entries[::400]
    bulk = rows([given["name"] for given in sample])
    Job.objects.filter(name__in=bulk).delete()
    monkeypatch.setattr(definitions, "save_jobs", lambda *args, **kwargs: (_ for _ in ()).throw(DatabaseError("no")))
    Path(path).write_text(json.dumps({"jobs": sample}))

    assert apply(path, user="owner")[0][-1] == f"applied: {len(sample)} created, 0 updated, 0 deleted."
    assert rows(bulk) == bulk
    assert work_entries().filter(action=Action.CREATE).exclude(job=people.job).count() == len(created) + len(sample)


def test_the_collector_is_paused_while_a_file_is_read_planned_and_saved_and_runs_again_after(tmp_path, monkeypatch):
    # Its full passes walked every entry, job and version a file keeps alive: a third of the CPU of
    # an apply of 100,000 jobs (jobs.collector).
    running = {}
    note_collector(monkeypatch, running, as_code, "read_entries", "read")
    note_collector(monkeypatch, running, definitions, "save_jobs", "save")
    assert gc.isenabled()

    assert apply(write(tmp_path, [entry(i) for i in range(COUNT)]))[0][-1] == \
        f"applied: {COUNT} created, 0 updated, 0 deleted."

    assert running == {"read": False, "save": False}
    assert gc.isenabled()


def test_a_refused_file_leaves_the_collector_running_and_a_paused_one_paused(tmp_path):
    refused = write(tmp_path, [entry(1, schedule={"type": "cron", "cron": "61 * * * *"})])
    with pytest.raises(CommandError, match="nothing was applied"):
        apply(refused)
    assert gc.isenabled()

    gc.disable()
    try:
        apply(write(tmp_path, [entry(i) for i in range(3)], name="fine.yaml"))
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert Job.objects.count() == 3
