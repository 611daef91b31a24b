"""jobsctl against a live service: a real gunicorn web process, a real worker where a run must
finish, and the command line installed from pyproject.toml and run as a subprocess. Every command,
its --json, each exit code and each error case."""

import json
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
import yaml
from django.contrib.auth.models import Group, Permission, User
from django.utils import timezone

from jobs.access import tokens as api_tokens
from jobs.actions.permissions import COMMAND_RUNNERS_GROUP
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus

from . import dst_oracle
from .test_api_jobs_as_code import FILE as JOBS_FILE

pytestmark = pytest.mark.timeout(300)

HOURLY = {"type": "cron", "cron": "0 * * * *", "timezone": "UTC"}


@pytest.fixture
def people(transactional_db):
    team = Group.objects.create(name="team")
    staff = User.objects.create_user("ops", is_staff=True)
    staff.groups.add(Group.objects.get(name=COMMAND_RUNNERS_GROUP))  # the ops user runs command jobs
    owner = User.objects.create_user("owner")
    outsider = User.objects.create_user("outsider")
    owner.groups.add(team)
    return {user.username: api_tokens.create(user)[1] for user in (staff, owner, outsider)}


def make_job(name, schedule=None, owner="owner", **fields):
    fields.setdefault("kind", "callable")
    fields.setdefault("target", "builtin.noop")
    return save_job(Job(name=name, owner=User.objects.get(username=owner), **fields), schedule or {"type": "manual"})


def lines(text):
    return [line for line in text.splitlines() if line.strip()]


def test_list_shows_your_jobs_as_a_table_or_json(jobsctl, people):
    make_job("nightly", HOURLY, tags=["reports"])
    make_job("by-hand", enabled=False)
    make_job("not-mine", owner="outsider")
    table = jobsctl("list", token=people["owner"])
    assert table.returncode == 0, table.stderr
    rows = lines(table.stdout)
    assert rows[0].split() == ["ID", "NAME", "KIND", "SCHEDULE", "ENABLED", "NEXT", "RUN", "LAST", "RUN"]
    assert [row.split()[1] for row in rows[1:]] == ["by-hand", "nightly"]
    assert "cron 0 * * * * (UTC)" in rows[2] and "- (paused)" in rows[1]
    for args in (["list", "--json"], ["--json", "list"]):
        listed = json.loads(jobsctl(*args, token=people["owner"]).stdout)
        assert [job["name"] for job in listed] == ["by-hand", "nightly"]
    tagged = json.loads(jobsctl("list", "--tag", "reports", "--json", token=people["owner"]).stdout)
    assert [job["name"] for job in tagged] == ["nightly"]
    paused = json.loads(jobsctl("list", "--paused", "--json", token=people["owner"]).stdout)
    assert [job["name"] for job in paused] == ["by-hand"]
    assert len(lines(jobsctl("list", token=people["ops"]).stdout)) == 4  # staff: the header and three jobs
    assert jobsctl("list", "--kind", "http", token=people["owner"]).stdout == "No jobs.\n"


def test_show_names_a_job_by_name_or_id(jobsctl, people):
    job = make_job("nightly", HOURLY, max_retries=4)
    run = JobRun.objects.create(job=job, scheduled_for=timezone.now(), status=RunStatus.SUCCEEDED)
    by_name = jobsctl("show", "nightly", token=people["owner"])
    assert by_name.returncode == 0, by_name.stderr
    assert ["schedule", "cron", "0", "*", "*", "*", "*", "(UTC)"] in [row.split() for row in lines(by_name.stdout)]
    assert ["max_retries", "4"] in [row.split() for row in lines(by_name.stdout)]
    assert [str(run.pk), "nightly", "succeeded", "schedule"] in [row.split()[:4] for row in lines(by_name.stdout)]
    by_id = json.loads(jobsctl("show", str(job.pk), "--json", token=people["owner"]).stdout)
    assert by_id["job"]["name"] == "nightly" and by_id["job"]["max_retries"] == 4
    assert [r["id"] for r in by_id["recent_runs"]] == [run.pk]


def test_show_gives_a_cron_jobs_dst_policy_and_its_next_clock_changes(jobsctl, people):
    make_job("night", {"type": "cron", "cron": "30 2 * * *", "timezone": "Europe/Berlin"}, dst_skipped="skip",
             dst_repeated="both")
    make_job("hourly", HOURLY)
    shown = jobsctl("show", "night", token=people["owner"]).stdout
    assert ["dst_skipped", "skip"] in [row.split() for row in lines(shown)]
    assert ["dst_repeated", "both"] in [row.split() for row in lines(shown)]
    # The service's clock is the real one: the next two changes of Berlin's, as the oracle finds them.
    now = timezone.now()
    changes = dst_oracle.zone_transitions("Europe/Berlin", now - timedelta(days=1), now + timedelta(days=800))
    changes = [change for change in changes if change[0] > now][:2]
    for at, before, after in changes:
        day = f"{at.astimezone(ZoneInfo('Europe/Berlin')):%-d %B}"
        assert (f"02:30 on {day} is skipped" if after > before else f"02:30 on {day} runs twice: 02:30 CEST and "
                                                                    "02:30 CET") in shown, shown
    assert shown.count("clock change") == 2
    plain = jobsctl("show", "hourly", token=people["owner"]).stdout
    assert ["dst_skipped", "shift"] in [row.split() for row in lines(plain)] and "clock change" not in plain  # UTC has none


def test_an_unknown_or_hidden_job_exits_3_with_one_line(jobsctl, people):
    make_job("secret-job", owner="outsider")
    for ref in ("nope", "secret-job", "999999"):
        result = jobsctl("show", ref, token=people["owner"])
        assert result.returncode == 3, result
        assert result.stdout == ""
        assert len(lines(result.stderr)) == 1 and result.stderr.startswith(f"jobsctl: no job named '{ref}'")
    assert jobsctl("run", "secret-job", token=people["owner"]).returncode == 3
    assert not JobRun.objects.exists()
    assert jobsctl("tail", "424242", token=people["owner"]).stderr == \
        "jobsctl: no run 424242 (or it is not yours to see).\n"


def test_run_wait_exits_0_when_the_run_succeeds_and_1_when_it_fails(jobsctl, people, processes):
    make_job("hello", kind="command", target="echo hello from the worker", owner="ops")
    make_job("broken", kind="command", target="echo going down; exit 3", owner="ops")
    processes.worker()
    ok = jobsctl("run", "hello", "--wait", "--interval", "0.3", token=people["ops"])
    assert ok.returncode == 0, ok.stderr
    assert "status" not in ok.stderr and "succeeded" in ok.stdout
    assert "hello from the worker" in ok.stdout
    failed = jobsctl("run", "broken", "--wait", "--json", "--interval", "0.3", token=people["ops"])
    assert failed.returncode == 1, failed.stderr
    run = json.loads(failed.stdout)
    assert run["status"] == "failed" and "going down" in run["output"]
    assert JobRun.objects.get(pk=run["id"]).status == RunStatus.FAILED


def test_run_without_wait_queues_and_run_wait_gives_up_after_its_timeout(jobsctl, people):
    make_job("idle")  # no worker: the run stays queued
    queued = json.loads(jobsctl("run", "idle", "--json", token=people["owner"]).stdout)
    assert queued["status"] == "queued" and JobRun.objects.get(pk=queued["id"]).trigger == "manual"
    plain = jobsctl("run", "idle", token=people["owner"])
    assert plain.returncode == 0 and plain.stdout.startswith("Run ") and plain.stdout.endswith(" of idle queued.\n")
    waited = jobsctl("run", "idle", "--wait", "--timeout", "1", "--interval", "0.2", token=people["owner"])
    assert waited.returncode == 7
    assert lines(waited.stderr)[-1].endswith("is still queued after 1 s.")


def test_tail_follows_a_run_until_it_ends(jobsctl, people, processes):
    job = make_job("chatty", kind="command", owner="ops",
                   target="for i in 1 2 3; do echo line $i; sleep 0.5; done")
    failing = make_job("chatty-fails", kind="command", owner="ops", target="echo last words; exit 1")
    processes.worker()
    run = json.loads(jobsctl("run", "chatty", "--json", token=people["ops"]).stdout)
    followed = jobsctl("tail", run["id"], "--interval", "0.3", token=people["ops"])
    assert followed.returncode == 0, followed.stderr
    assert followed.stdout == "line 1\nline 2\nline 3\n"
    assert followed.stderr == f"run {run['id']} succeeded\n"
    jobsctl("run", "chatty-fails", token=people["ops"])
    newest = jobsctl("tail", "--job", "chatty-fails", "--json", "--interval", "0.3", token=people["ops"])
    assert newest.returncode == 1
    events = [json.loads(line) for line in lines(newest.stdout)]
    assert events[0]["output"] == "last words\n" and events[-1]["status"] == "failed"
    assert events[-1]["job"] == failing.pk
    assert job.pk != failing.pk
    assert jobsctl("tail", token=people["ops"]).returncode == 2


def test_pause_and_resume(jobsctl, people):
    job = make_job("nightly", HOURLY)
    paused = jobsctl("pause", "nightly", token=people["owner"])
    assert (paused.returncode, paused.stdout) == (0, "Paused nightly.\n")
    job.refresh_from_db()
    assert not job.enabled
    resumed = json.loads(jobsctl("resume", str(job.pk), "--json", token=people["owner"]).stdout)
    job.refresh_from_db()
    assert job.enabled and resumed["enabled"] is True and resumed["next_run_at"] is not None
    assert jobsctl("resume", "nightly", token=people["owner"]).stdout.startswith("Resumed nightly; next run 20")
    assert json.loads(jobsctl("pause", "nightly", "--json", token=people["owner"]).stdout)["enabled"] is False
    assert jobsctl("pause", "nightly", token=people["outsider"]).returncode == 3


def test_runs_lists_the_history_with_filters(jobsctl, people):
    job = make_job("nightly", HOURLY)
    other = make_job("other")
    now = timezone.now()
    old = JobRun.objects.create(job=job, scheduled_for=now - timedelta(days=3), status=RunStatus.FAILED)
    JobRun.objects.filter(pk=old.pk).update(created_at=now - timedelta(days=3))
    recent = JobRun.objects.create(job=job, scheduled_for=now, status=RunStatus.SUCCEEDED)
    JobRun.objects.create(job=other, scheduled_for=now, status=RunStatus.FAILED)
    table = jobsctl("runs", "nightly", token=people["owner"])
    assert table.returncode == 0
    assert [row.split()[0] for row in lines(table.stdout)] == ["ID", str(recent.pk), str(old.pk)]
    failed = json.loads(jobsctl("runs", "--status", "failed", "--json", token=people["owner"]).stdout)
    assert {r["job_name"] for r in failed} == {"nightly", "other"}
    since = json.loads(jobsctl("runs", "nightly", "--since", "1d", "--json", token=people["owner"]).stdout)
    assert [r["id"] for r in since] == [recent.pk]
    assert len(json.loads(jobsctl("runs", "--limit", "1", "--json", token=people["owner"]).stdout)) == 1
    assert jobsctl("runs", token=people["outsider"]).stdout == "No runs.\n"
    refused = jobsctl("runs", "--status", "exploded", token=people["owner"])
    assert refused.returncode == 6
    assert refused.stderr.startswith("jobsctl: refused: status: Must be one of")




def test_apply_plans_applies_and_prunes(jobsctl, people):
    make_job("leftover", owner="ops")
    path = jobsctl.home / "jobs.yaml"
    path.write_text(JOBS_FILE)
    dry = jobsctl("apply", path, "--dry-run", token=people["ops"])
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout == ("+ create hourly\n+ create weekly\n= unchanged: 0\n"
                          "dry run: the plan is valid; nothing was saved.\n")
    assert set(Job.objects.values_list("name", flat=True)) == {"leftover"}
    applied = jobsctl("apply", path, "--prune", token=people["ops"])
    assert applied.stdout.endswith("applied: 2 created, 0 updated, 1 deleted.\n"), applied.stderr
    assert set(Job.objects.values_list("name", flat=True)) == {"hourly", "weekly"}
    again = json.loads(jobsctl("apply", path, "--json", token=people["ops"]).stdout)
    assert again["applied"] is False and again["changes"] == []
    assert jobsctl("apply", path, token=people["ops"]).stdout.endswith("no changes\n")
    from_stdin = jobsctl("apply", "-", "--dry-run", token=people["ops"], stdin=JOBS_FILE.replace("2", "5"))
    assert "~ update weekly: max_retries: 2 -> 5" in from_stdin.stdout


def test_apply_of_a_bad_file_exits_6_naming_line_job_and_key(jobsctl, people):
    path = jobsctl.home / "jobs.yaml"
    path.write_text(JOBS_FILE.replace("max_retries: 2", "max_retries: lots"))
    result = jobsctl("apply", path, token=people["ops"])
    assert result.returncode == 6
    errors = lines(result.stderr)
    assert errors[0].startswith(f"jobsctl: {path}: line 6: jobs[1] (name: weekly): max_retries: ")
    assert errors[-1] == f"jobsctl: {path}: nothing was applied (1 error(s))."
    as_json = jobsctl("apply", path, "--json", token=people["ops"])
    assert as_json.returncode == 6
    assert json.loads(as_json.stdout)["errors"][0]["key"] == "max_retries"
    assert not Job.objects.exists()
    missing = jobsctl("apply", jobsctl.home / "nope.yaml", token=people["ops"])
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    wrong_name = jobsctl("apply", path.rename(jobsctl.home / "jobs.txt"), token=people["ops"])
    assert wrong_name.returncode == 2


def test_apply_needs_staff_or_the_permission(jobsctl, people):
    path = jobsctl.home / "jobs.yaml"
    path.write_text(JOBS_FILE)
    denied = jobsctl("apply", path, token=people["owner"])
    assert denied.returncode == 4
    assert denied.stderr == "jobsctl: not allowed: Applying jobs as code needs staff or the jobs.add_job permission.\n"
    User.objects.get(username="owner").user_permissions.add(
        Permission.objects.get(codename="add_job", content_type__app_label="jobs"))
    assert jobsctl("apply", path, token=people["owner"]).returncode == 0
    assert set(Job.objects.filter(owner__username="owner").values_list("name", flat=True)) == {"hourly", "weekly"}


def test_export_writes_a_file_that_applies_back_unchanged(jobsctl, people):
    make_job("nightly", HOURLY, owner="ops", max_retries=3)
    out = jobsctl("export", token=people["ops"])
    assert out.returncode == 0
    assert yaml.safe_load(out.stdout) == {"jobs": [{"name": "nightly", "kind": "callable", "target": "builtin.noop",
                                                    "schedule": HOURLY, "max_retries": 3}]}
    saved = jobsctl("export", "jobs.json", token=people["ops"])
    assert saved.stdout == "Exported 1 jobs to jobs.json.\n"
    assert json.loads((jobsctl.home / "jobs.json").read_text())["jobs"][0]["name"] == "nightly"
    assert json.loads(jobsctl("export", "--json", token=people["ops"]).stdout)["jobs"] == 1
    assert jobsctl("apply", "jobs.json", "--prune", token=people["ops"]).stdout.endswith("no changes\n")


def test_slots_and_why_account_for_each_slot(jobsctl, people):
    now = timezone.now()
    base = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=5)
    job = make_job("hourly", HOURLY)
    Job.objects.filter(pk=job.pk).update(created_at=base - timedelta(hours=1))
    ran = [JobRun.objects.create(job=job, scheduled_for=base + timedelta(hours=h), status=RunStatus.SUCCEEDED)
           for h in (0, 1, 3)]
    start, end = base.isoformat(), (base + timedelta(hours=3, minutes=30)).isoformat()
    report = jobsctl("slots", "hourly", "--from", start, "--to", end, token=people["owner"])
    assert report.returncode == 1
    assert lines(report.stdout)[-1] == "3 ran, 0 skipped, 1 missing, 0 due, 0 upcoming"
    missing_row = [row for row in lines(report.stdout) if "missing" in row.split()[3:4]]
    assert missing_row and missing_row[0].startswith((base + timedelta(hours=2)).strftime("%Y-%m-%d %H:%M:%S UTC"))
    assert report.stderr == "jobsctl: 1 slot(s) missing: a 'missed' alert was raised.\n"
    as_json = jobsctl("slots", "hourly", "--from", start, "--to", end, "--json", token=people["owner"])
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["counts"]["missing"] == 1
    clean = jobsctl("slots", "hourly", "--from", start, "--to", (base + timedelta(hours=2)).isoformat(),
                    token=people["owner"])
    assert clean.returncode == 0
    why = jobsctl("why", "hourly", (base + timedelta(hours=1)).isoformat(), token=people["owner"])
    assert why.returncode == 0
    assert why.stdout.startswith(f"It ran: run #{ran[1].pk}")
    answer = json.loads(jobsctl("why", "hourly", base.isoformat(), "--json", token=people["owner"]).stdout)
    assert answer["job"] == "hourly" and answer["explanation"].startswith(f"It ran: run #{ran[0].pk}")
    bad = jobsctl("why", "hourly", "teatime", token=people["owner"])
    assert bad.returncode == 6 and bad.stderr.startswith("jobsctl: refused: at: Must be an ISO 8601")


def test_tokens_lists_yours_and_revoke_token_ends_the_one_in_use(jobsctl, people):
    _, spare = api_tokens.create(User.objects.get(username="owner"))
    listed = jobsctl("tokens", "--json", token=people["owner"])
    assert listed.returncode == 0, listed.stderr
    assert sorted((t["prefix"], t["current"]) for t in json.loads(listed.stdout)) == sorted(
        [(people["owner"][:15], True), (spare[:15], False)])
    assert people["owner"] not in jobsctl("tokens", token=people["owner"]).stdout  # never the whole key

    other = jobsctl("revoke-token", people["ops"][:15], token=people["owner"])
    assert other.returncode == 3 and jobsctl("list", token=people["ops"]).returncode == 0  # not another's
    revoked = jobsctl("revoke-token", token=people["owner"])
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout == f"Revoked {people['owner'][:15]}…: it is refused from now on.\n"
    refused = jobsctl("list", token=people["owner"])
    assert refused.returncode == 4 and "the server refused the token" in refused.stderr
    assert jobsctl("list", token=spare).returncode == 0
