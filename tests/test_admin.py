"""The admin pages for jobs and runs, driven through the admin's own forms and actions."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from jobs.definitions.jobs import save_job
from jobs.models import AttemptOutcome, Job, JobAttempt, JobRun, RunStatus, RunTrigger

pytestmark = pytest.mark.django_db

ADD_URL = reverse("admin:jobs_job_add")
JOBS_URL = reverse("admin:jobs_job_changelist")
RUNS_URL = reverse("admin:jobs_jobrun_changelist")


def form_data(**overrides):
    data = {
        "name": "nightly-report", "description": "", "owner": "", "group": "", "tags": "[]",
        "kind": "callable", "target": "builtin.noop", "args": "[]", "kwargs": "{}", "environment": "{}",
        "http_method": "GET", "http_headers": "{}", "http_body": "", "http_ok_statuses": "[]",
        "schedule_type": "cron", "cron": "30 2 * * 1-5", "timezone": "Europe/Berlin",
        "every_seconds": "", "run_at": "", "catchup_policy": "latest", "catchup_max": "10", "enabled": "on",
        "overlap_policy": "allow", "start_deadline_seconds": "", "jitter_seconds": "0", "spread": "0",
        "dst_skipped": "shift", "dst_repeated": "first", "bundle": "auto",
        "queue": "", "priority": "5", "max_retries": "2", "retry_backoff_seconds": "10", "retry_backoff_max_seconds": "600",
        "retry_jitter": "on", "timeout_seconds": "3600", "sla_seconds": "",
    }
    data.update(overrides)
    return data


def make_job(name, schedule=None, **fields):
    fields.setdefault("kind", "callable")
    fields.setdefault("target", "builtin.noop")
    return save_job(Job(name=name, **fields), schedule or {"type": "manual"})


def make_run(job, status=RunStatus.SUCCEEDED, **fields):
    now = timezone.now()
    return JobRun.objects.create(job=job, status=status, scheduled_for=fields.pop("scheduled_for", now), **fields)


def act(client, url, action, objects):
    return client.post(url, {"action": action, ACTION_CHECKBOX_NAME: [o.pk for o in objects]}, follow=True)


def test_it_creates_a_cron_job_and_shows_its_next_five_runs(admin_client):
    response = admin_client.post(ADD_URL, form_data())

    assert response.status_code == 302, response.context["adminform"].form.errors
    job = Job.objects.get(name="nightly-report")
    assert job.schedule_type == "cron"
    assert job.cron_expression == "30 2 * * 1-5"
    assert str(job.crontab.timezone) == "Europe/Berlin"
    assert job.next_run_at > timezone.now()
    assert job.next_run_at == job.upcoming_slots(1)[0]

    page = admin_client.get(reverse("admin:jobs_job_change", args=[job.pk])).content.decode()
    assert "At 02:30 AM, Monday through Friday" in page
    assert page.count("(Europe/Berlin) = ") == 5
    first = job.upcoming_slots(1)[0]
    assert first.strftime("%Y-%m-%d %H:%M:%S") + " UTC" in page
    assert 'value="30 2 * * 1-5"' in page


def test_it_creates_an_interval_job(admin_client):
    response = admin_client.post(ADD_URL, form_data(schedule_type="interval", cron="", every_seconds="90"))

    assert response.status_code == 302
    job = Job.objects.get(name="nightly-report")
    assert job.describe_schedule() == "Every 90 seconds"
    assert job.crontab is None


def test_it_creates_a_one_time_job_at_an_iso_moment(admin_client):
    response = admin_client.post(ADD_URL, form_data(schedule_type="once", cron="",
                                                     run_at="2030-01-01T10:00:00+02:00"))

    assert response.status_code == 302, response.context["adminform"].form.errors
    job = Job.objects.get(name="nightly-report")
    assert job.next_run_at == datetime(2030, 1, 1, 8, 0, tzinfo=UTC)
    assert job.describe_schedule() == "Once at 2030-01-01T08:00:00+00:00"


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"cron": "61 * * * *"}, "cron", "is not a valid cron expression"),
        ({"cron": "* * *"}, "cron", "A cron expression has 5 fields"),
        ({"timezone": "Mars/Olympus_Mons"}, "timezone", "is not a known IANA timezone"),
        ({"target": "no.such.function"}, "target", "No registered function named 'no.such.function'"),
        ({"schedule_type": "interval", "every_seconds": ""}, "every_seconds", "whole number of seconds"),
        ({"schedule_type": "once", "run_at": ""}, "run_at", "ISO 8601"),
    ],
)
def test_it_shows_a_field_error_and_saves_nothing(admin_client, overrides, field, message):
    response = admin_client.post(ADD_URL, form_data(**overrides))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert field in errors
    assert message in " ".join(errors[field])
    assert escape(message) in response.content.decode()
    assert not Job.objects.exists()


def test_it_prefills_the_schedule_fields_on_the_change_page(admin_client):
    job = make_job("every-5m", {"type": "interval", "every_seconds": 300})

    form = admin_client.get(reverse("admin:jobs_job_change", args=[job.pk])).context["adminform"].form

    assert form.initial["schedule_type"] == "interval"
    assert form.initial["every_seconds"] == 300


def change_data(runs_shown, **overrides):
    management = {"runs-TOTAL_FORMS": runs_shown, "runs-INITIAL_FORMS": runs_shown,
                  "runs-MIN_NUM_FORMS": 0, "runs-MAX_NUM_FORMS": 0}
    return {**form_data(**overrides), **management}


def test_it_changes_a_schedule_from_the_change_page(admin_client):
    job = make_job("nightly-report", {"type": "cron", "cron": "0 3 * * *"})
    make_run(job)

    response = admin_client.post(reverse("admin:jobs_job_change", args=[job.pk]),
                                 change_data(1, schedule_type="interval", cron="", every_seconds="120"))

    assert response.status_code == 302, response.context["adminform"].form.errors
    job.refresh_from_db()
    assert (job.schedule_type, job.crontab, job.every_seconds) == ("interval", None, 120)
    assert timezone.now() < job.next_run_at <= timezone.now() + timedelta(seconds=120)


def test_it_keeps_the_next_slot_when_only_other_fields_change(admin_client):
    job = make_job("nightly-report", {"type": "interval", "every_seconds": 3600})
    slot = job.next_run_at

    response = admin_client.post(reverse("admin:jobs_job_change", args=[job.pk]),
                                 change_data(0, schedule_type="interval", cron="", timezone="UTC",
                                             every_seconds="3600", description="now documented"))

    assert response.status_code == 302, response.context["adminform"].form.errors
    job.refresh_from_db()
    assert (job.description, job.next_run_at) == ("now documented", slot)


def test_it_runs_the_selected_jobs_now(admin_client, admin_user):
    first, second = make_job("a"), make_job("b")

    response = act(admin_client, JOBS_URL, "run_selected_now", [first, second])

    runs = list(JobRun.objects.order_by("pk"))
    assert [(r.job, r.trigger, r.status, r.triggered_by) for r in runs] == [
        (first, RunTrigger.MANUAL, RunStatus.QUEUED, admin_user), (second, RunTrigger.MANUAL, RunStatus.QUEUED, admin_user)
    ]
    assert f"Started 2 run(s): #{runs[0].pk}, #{runs[1].pk}." in response.content.decode()


def test_it_pauses_and_resumes_the_selected_jobs(admin_client):
    job = make_job("hourly", {"type": "cron", "cron": "0 * * * *"})

    act(admin_client, JOBS_URL, "pause_selected", [job])
    job.refresh_from_db()
    assert job.enabled is False

    job.next_run_at = timezone.now() - timedelta(days=1)  # as if paused for a day
    job.save()
    act(admin_client, JOBS_URL, "resume_selected", [job])
    job.refresh_from_db()
    assert job.enabled is True
    assert job.next_run_at == job.upcoming_slots(1)[0]


def test_it_clones_a_job_as_a_disabled_copy(admin_client):
    job = make_job("report", {"type": "cron", "cron": "0 6 * * *", "timezone": "Asia/Tokyo"}, kwargs={"x": 1})

    act(admin_client, JOBS_URL, "clone_selected", [job])
    act(admin_client, JOBS_URL, "clone_selected", [job])

    copy = Job.objects.get(name="report (copy)")
    assert copy.enabled is False
    assert copy.owner.username == "admin"  # the clone is the actor's (make_job's job is no one's)
    assert (copy.kwargs, copy.cron_expression, str(copy.crontab.timezone)) == ({"x": 1}, "0 6 * * *", "Asia/Tokyo")
    assert Job.objects.filter(name="report (copy 2)").exists()
    assert Job.objects.get(name="report").enabled is True


def test_it_lists_the_latest_runs_on_the_job_page(admin_client):
    job = make_job("busy")
    start = timezone.now() - timedelta(hours=1)
    runs = [make_run(job, scheduled_for=start + timedelta(minutes=i), worker=f"w{i}@host",
                     created_at=start + timedelta(minutes=i)) for i in range(25)]
    Job.objects.filter(pk=job.pk).update(last_run=runs[-1])

    page = admin_client.get(reverse("admin:jobs_job_change", args=[job.pk])).content.decode()

    assert "w24@host" in page and "w5@host" in page
    assert "w4@host" not in page
    assert reverse("admin:jobs_jobrun_change", args=[runs[-1].pk]) in page


def test_it_shows_a_run_with_its_output_error_and_attempts(admin_client):
    job = make_job("flaky")
    run = make_run(job, status=RunStatus.FAILED, attempt=2, max_attempts=2, worker="w1@host",
                   output="line one\n<b>line two</b>", error="RuntimeError: boom")
    for number in (1, 2):
        JobAttempt.objects.create(run=run, number=number, outcome=AttemptOutcome.FAILED, task_id=f"run-{run.pk}-{number}",
                                  worker="w1@host", pid=4242 + number, error=f"boom {number}",
                                  traceback=f"Traceback: attempt {number}")

    page = admin_client.get(reverse("admin:jobs_jobrun_change", args=[run.pk])).content.decode()

    assert "line one\n&lt;b&gt;line two&lt;/b&gt;</pre>" in page
    assert "RuntimeError: boom" in page
    assert "Traceback: attempt 1" in page and "Traceback: attempt 2" in page
    assert "4243" in page and "4244" in page
    assert f"http://127.0.0.1:5555/task/run-{run.pk}-2" in page
    assert 'name="_save"' not in page  # read-only


def test_it_cancels_a_queued_run_from_the_run_list(admin_client):
    job = make_job("slow")
    queued, done = make_run(job, status=RunStatus.QUEUED), make_run(job, scheduled_for=timezone.now() - timedelta(1))

    response = act(admin_client, RUNS_URL, "cancel_selected", [queued, done])

    queued.refresh_from_db()
    done.refresh_from_db()
    assert (queued.status, done.status) == (RunStatus.CANCELLED, RunStatus.SUCCEEDED)
    assert f"Cancelled 1 run(s): #{queued.pk}; 1 had already finished." in response.content.decode()


def test_it_does_not_let_anyone_add_runs(admin_client):
    assert admin_client.get(reverse("admin:jobs_jobrun_add")).status_code == 403


def test_it_lets_only_superusers_delete_runs(client, django_user_model):
    staff = django_user_model.objects.create_user("operator", password="pw", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(content_type__app_label="jobs"))
    client.force_login(staff)
    run = make_run(make_job("nightly"))

    assert client.get(reverse("admin:jobs_jobrun_change", args=[run.pk])).status_code == 200
    assert client.get(reverse("admin:jobs_jobrun_delete", args=[run.pk])).status_code == 403
    actions = client.get(RUNS_URL).context["action_form"].fields["action"].choices
    assert [name for name, _ in actions] == ["", "cancel_selected"]


def test_it_lists_thirty_jobs_and_runs_with_a_bounded_number_of_queries(
    admin_client, django_assert_max_num_queries
):
    start = timezone.now() - timedelta(minutes=30)
    for i in range(30):
        schedule = [{"type": "cron", "cron": f"{i} * * * *", "timezone": "Europe/Paris"},
                    {"type": "interval", "every_seconds": 60 + i}, {"type": "manual"}][i % 3]
        job = make_job(f"job-{i:02d}", schedule)
        run = make_run(job, status=RunStatus.FAILED if i % 2 else RunStatus.SUCCEEDED,
                       scheduled_for=start + timedelta(seconds=i), worker="w@host")
        Job.objects.filter(pk=job.pk).update(last_run=run)

    with django_assert_max_num_queries(8):
        page = admin_client.get(JOBS_URL).content.decode()
    assert "job-29" in page and "Every 88 seconds" in page and "run-status-failed" in page

    with django_assert_max_num_queries(10):
        page = admin_client.get(RUNS_URL).content.decode()
    assert page.count("run-status-") >= 30


def test_a_job_added_in_the_admin_is_owned_by_its_creator_by_default(admin_client, admin_user):
    page = admin_client.get(ADD_URL)
    assert page.context["adminform"].form["owner"].value() == admin_user.pk
    assert f'<option value="{admin_user.pk}" selected>{admin_user.username}</option>' in page.text

    admin_client.post(ADD_URL, form_data(owner=str(admin_user.pk)))
    assert Job.objects.get(name="nightly-report").owner == admin_user


def test_the_add_form_labels_read_as_words(admin_client):
    labels = [field.label for field in admin_client.get(ADD_URL).context["adminform"].form]
    for label in ("CPU time limit (s)", "SLA (s)", "Timeout (s)", "Memory limit (MB)", "HTTP method",
                  "Keyword arguments", "Every (s)", "Catch-up policy"):
        assert label in labels
    assert not [label for label in labels if label.startswith(("Cpu", "Sla", "Http", "Kwargs"))]


@pytest.mark.parametrize(("field", "rule"), [("timeout_seconds", 1), ("sla_seconds", 1), ("memory_limit_mb", 8),
                                             ("start_deadline_seconds", 1), ("every_seconds", 1)])
def test_each_number_field_states_one_rule_whatever_the_wrong_value(admin_client, field, rule):
    extra = {"schedule_type": "interval", "every_seconds": "60"} if field != "every_seconds" else {
        "schedule_type": "interval"}
    for wrong in ("-5", "0", str(rule - 1)):
        response = admin_client.post(ADD_URL, form_data(**{**extra, field: wrong}))
        assert response.context["adminform"].form.errors[field] == [
            f"Ensure this value is greater than or equal to {rule}."], wrong
