"""A job's DST policy (``dst_skipped``, ``dst_repeated``) through the API, the pages' form, the
admin and jobs-as-code files: accepted, shown, refused with a message naming the field, and a new
policy moves the job's next slot (a new policy is a new schedule). The expected slots come from the
test's own oracle (tests/dst_oracle.py)."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core.management import CommandError
from django.urls import reverse

from audit.models import AuditEntry
from jobs.definitions.jobs import save_job
from jobs.models import Job
from jobs.operations import slot_report

from . import dst_oracle
from .api_personas import browser
from .conftest import command_output
from .test_admin import ADD_URL, form_data
from .test_job_forms import form_of, submit

pytestmark = pytest.mark.django_db

BEFORE_SPRING = datetime(2027, 3, 27, 12, 0, tzinfo=UTC)  # Berlin's clocks jump at 2027-03-28 01:00 UTC
BAD_VALUES = ["sometimes", "", None, 1, ["skip"], "skip' OR '1'='1", "x" * 100_000]


def cron_body(name, **fields):
    return {"name": name, "kind": "callable", "target": "builtin.noop",
            "schedule": {"type": "cron", "cron": "30 2 * * *", "timezone": "Europe/Berlin"}, **fields}


def oracle_next(policy, after):
    return dst_oracle.policy_slots_between("30 2 * * *", "Europe/Berlin", after, after + timedelta(days=3), *policy)[0]


def test_the_api_takes_shows_and_defaults_the_policy(people):
    client = people.client(people.owner)
    with time_machine.travel(BEFORE_SPRING, tick=False):
        made = client.post("/api/jobs/", cron_body("skipping", dst_skipped="skip", dst_repeated="both"), format="json")
        plain = client.post("/api/jobs/", cron_body("plain"), format="json")
    assert made.status_code == 201, made.json()
    assert (made.json()["dst_skipped"], made.json()["dst_repeated"]) == ("skip", "both")
    assert (plain.json()["dst_skipped"], plain.json()["dst_repeated"]) == ("shift", "first")
    job = Job.objects.get(name="skipping")
    # 02:30 on 28 March does not exist: under skip the next slot is the 29th's.
    assert job.next_run_at == oracle_next(("skip", "both"), BEFORE_SPRING)
    assert Job.objects.get(name="plain").next_run_at == oracle_next(("shift", "first"), BEFORE_SPRING)
    assert job.next_run_at != Job.objects.get(name="plain").next_run_at


@pytest.mark.parametrize("field", ["dst_skipped", "dst_repeated"])
@pytest.mark.parametrize("value", BAD_VALUES, ids=range(len(BAD_VALUES)))
def test_the_api_refuses_a_bad_policy_naming_the_field_and_saves_nothing(people, field, value):
    client = people.client(people.owner)
    created = client.post("/api/jobs/", cron_body("bad", **{field: value}), format="json")
    changed = client.patch(f"/api/jobs/{people.job.pk}/", {field: value}, format="json")
    for response in (created, changed):
        assert response.status_code == 400, response.content[:300]
        assert list(response.json()) == [field]
        assert len(response.content) < 2000  # a huge value is not echoed back
        if value is not None:
            assert response.json()[field] == [f"Must be one of {'shift, skip' if field == 'dst_skipped' else 'first, second, both'}."]
    assert not Job.objects.filter(name="bad").exists()
    people.job.refresh_from_db()
    assert (people.job.dst_skipped, people.job.dst_repeated) == ("shift", "first")


def test_a_new_policy_moves_the_next_slot_and_the_slot_check_starts_afresh(people):
    client = people.client(people.owner)
    with time_machine.travel(BEFORE_SPRING - timedelta(days=1), tick=False):
        job_id = client.post("/api/jobs/", cron_body("moved"), format="json").json()["id"]
    Job.objects.filter(pk=job_id).update(slot_check_from=BEFORE_SPRING)
    with time_machine.travel(BEFORE_SPRING, tick=False):
        response = client.patch(f"/api/jobs/{job_id}/", {"dst_skipped": "skip"}, format="json")
    assert response.status_code == 200, response.json()
    job = Job.objects.get(pk=job_id)
    assert job.next_run_at == oracle_next(("skip", "first"), BEFORE_SPRING)
    assert job.slot_check_from is None
    entry = AuditEntry.objects.filter(job=job, action="change").get()
    assert entry.changes["dst_skipped"] == ["shift", "skip"]
    # The slot report checks from the change on: the old policy's slots are not the job's any more.
    assert slot_report.schedule_changed_at(job) == entry.created_at
    # Back to the default, and the next slot is the shifted 02:30 again.
    with time_machine.travel(BEFORE_SPRING, tick=False):
        client.patch(f"/api/jobs/{job_id}/", {"dst_skipped": "shift"}, format="json")
    job.refresh_from_db()
    assert job.next_run_at == oracle_next(("shift", "first"), BEFORE_SPRING)


def test_the_form_offers_the_policy_saves_it_and_shows_the_apis_message(people):
    client = browser(people.owner)
    form = form_of(client, "/jobs/new/")
    assert form["dst_skipped"] == ["shift"] and form["dst_repeated"] == ["first"]

    response = submit(client, "/jobs/new/", form, name="formed", target="builtin.noop", schedule_type="cron",
                      cron="30 2 * * *", timezone="Europe/Berlin", dst_skipped="skip", dst_repeated="second")

    assert response.status_code == 302
    job = Job.objects.get(name="formed")
    assert (job.dst_skipped, job.dst_repeated) == ("skip", "second")
    again = form_of(client, f"/jobs/{job.pk}/edit/")
    assert again["dst_skipped"] == ["skip"] and again["dst_repeated"] == ["second"]
    refused = submit(client, f"/jobs/{job.pk}/edit/", again, dst_repeated="thrice")
    assert refused.status_code == 400 and "Must be one of first, second, both." in refused.content.decode()
    job.refresh_from_db()
    assert job.dst_repeated == "second"


def test_the_admin_saves_the_policy_and_refuses_a_bad_one(admin_client):
    response = admin_client.post(ADD_URL, form_data(dst_skipped="skip", dst_repeated="both"))
    assert response.status_code == 302
    job = Job.objects.get(name="nightly-report")
    assert (job.dst_skipped, job.dst_repeated) == ("skip", "both")
    refused = admin_client.post(reverse("admin:jobs_job_change", args=[job.pk]),
                                form_data(dst_skipped="never", dst_repeated="both"))
    assert refused.status_code == 200 and "Select a valid choice. never is not one of the available choices." in \
        refused.content.decode()
    job.refresh_from_db()
    assert job.dst_skipped == "skip"


def test_jobs_files_carry_the_policy_and_name_a_bad_one(tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text("""\
jobs:
- name: night
  kind: callable
  target: builtin.noop
  schedule: {type: cron, cron: '30 2 * * *', timezone: Europe/Berlin}
  dst_skipped: skip
  dst_repeated: both
- name: plain
  kind: callable
  target: builtin.noop
  schedule: {type: cron, cron: '30 2 * * *', timezone: Europe/Berlin}
""")
    command_output("jobs", "apply", str(path))
    night = Job.objects.get(name="night")
    assert (night.dst_skipped, night.dst_repeated) == ("skip", "both")
    exported = tmp_path / "out.yaml"
    command_output("jobs", "export", str(exported))
    text = exported.read_text()
    assert text.count("dst_skipped: skip") == 1 and text.count("dst_repeated: both") == 1
    assert "dst_skipped: shift" not in text  # a default is left out, as every field's

    path.write_text(path.read_text().replace("dst_repeated: both", "dst_repeated: twice"))
    with pytest.raises(CommandError) as error:
        command_output("jobs", "apply", str(path))
    assert "line 2: jobs[0] (name: night): dst_repeated: Must be one of first, second, both." in str(error.value)
    assert Job.objects.get(name="night").dst_repeated == "both"


def test_the_slot_check_computes_a_shared_schedules_slots_once_per_policy():
    schedule = {"type": "cron", "cron": "*/15 2 * * *", "timezone": "Europe/Berlin"}
    with time_machine.travel(BEFORE_SPRING, tick=False):
        shifting = save_job(Job(name="shifting", kind="callable", target="builtin.noop"), schedule)
        skipping = save_job(Job(name="skipping", kind="callable", target="builtin.noop", dst_skipped="skip"), schedule)
    assert shifting.crontab_id == skipping.crontab_id  # one django-celery-beat row for both
    start, end = BEFORE_SPRING, BEFORE_SPRING + timedelta(days=1)
    window = slot_report.WindowSlots(start, end, end)
    assert window.between(shifting, start, end) == dst_oracle.policy_slots_between(
        "*/15 2 * * *", "Europe/Berlin", start, end, "shift", "first")
    assert window.between(skipping, start, end) == [] == dst_oracle.policy_slots_between(
        "*/15 2 * * *", "Europe/Berlin", start, end, "skip", "first")
