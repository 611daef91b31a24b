"""The job forms of the pages (jobs/pages/job_forms.py): create, edit, clone and delete with the
API's rules and messages, key/value rows, write-only secrets, the schedule preview, and who may do
what. Forms are submitted as a browser without JavaScript would: every field the page shows."""

import re
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.utils.html import escape
from django_celery_beat.models import CrontabSchedule, IntervalSchedule

from audit.models import AuditEntry
from jobs.access import secrets
from jobs.actions.permissions import COMMAND_JOBS_DENIED
from jobs.definitions.jobs import save_job
from jobs.models import Job

from .api_personas import browser
from .workflow_helpers import make_workflow

pytestmark = pytest.mark.django_db


class FormReader(HTMLParser):
    """The (name, value) pairs a browser sends for the page's form with method=post."""

    def __init__(self):
        super().__init__()
        self.pairs, self.in_form, self.select, self.textarea = [], False, None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and attrs.get("method") == "post" and "data-job-form" in attrs:
            self.in_form = True
        if not self.in_form or "name" not in attrs and tag != "option":
            return
        if tag == "input" and attrs.get("type") not in ("checkbox", "submit"):
            self.pairs.append((attrs["name"], attrs.get("value") or ""))
        elif tag == "input" and "checked" in attrs:
            self.pairs.append((attrs["name"], "on"))
        elif tag == "select":
            self.select = [attrs["name"], None]
        elif tag == "option" and self.select is not None and ("selected" in attrs or self.select[1] is None):
            self.select[1] = attrs.get("value", "")
        elif tag == "textarea":
            self.textarea = [attrs["name"], ""]

    def handle_data(self, data):
        if self.textarea is not None:
            self.textarea[1] += data

    def handle_endtag(self, tag):
        if tag == "form":
            self.in_form = False
        elif tag == "select" and self.select is not None:
            self.pairs.append(tuple(self.select))
            self.select = None
        elif tag == "textarea" and self.textarea is not None:
            name, text = self.textarea
            self.pairs.append((name, text.removeprefix("\n")))  # as browsers read it
            self.textarea = None


def form_of(client, url):
    """The form at ``url`` as {name: [values]}, what a browser would submit unchanged."""
    response = client.get(url)
    assert response.status_code == 200
    reader = FormReader()
    reader.feed(response.content.decode())
    form = {}
    for name, value in reader.pairs:
        form.setdefault(name, []).append(value)
    return form


def submit(client, url, form, **changes):
    data = {**form, **{name: value if isinstance(value, list) else [value] for name, value in changes.items()}}
    return client.post(url, data)


def test_it_creates_a_job_with_its_arguments_as_rows_and_shows_them_again(people):
    client = browser(people.teammate)
    form = form_of(client, "/jobs/new/")
    assert form["kind"] == ["callable"] and form["schedule_type"] == ["manual"]

    response = submit(client, "/jobs/new/", form, name="weekly-digest", target="builtin.echo", tags="reports, weekly",
                      group="team", schedule_type="cron", cron="0 7 * * 1", timezone="Europe/Berlin",
                      **{"args-value": ["42", '"42"', "plain text", "NaN", "", "Grüße"],
                         "kwargs-key": ["day", "flags", ""], "kwargs-value": ["monday", "[1, 2]", ""]})

    job = Job.objects.get(name="weekly-digest")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.args == [42, "42", "plain text", "NaN", "Grüße"] and job.kwargs == {"day": "monday", "flags": [1, 2]}
    assert job.tags == ["reports", "weekly"] and job.group == people.team and job.owner == people.teammate
    assert job.describe_schedule() == "At 07:00 AM, only on Monday (0 7 * * 1, Europe/Berlin)"
    entry = AuditEntry.objects.get(job=job)
    assert (entry.action, entry.source, entry.actor) == ("create", "page", people.teammate)

    # The rows come back as they were typed, and the form saved unchanged changes nothing.
    again = form_of(client, f"/jobs/{job.pk}/edit/")
    assert again["args-value"] == ["42", '"42"', "plain text", "NaN", "Grüße", ""]  # and an empty row to add to
    assert again["kwargs-key"] == ["day", "flags", ""] and again["kwargs-value"] == ["monday", "[1, 2]", ""]
    assert again["cron"] == ["0 7 * * 1"] and again["timezone"] == ["Europe/Berlin"]
    assert submit(client, f"/jobs/{job.pk}/edit/", again).status_code == 302
    assert AuditEntry.objects.filter(job=job).count() == 1  # no change, no entry
    job.refresh_from_db()
    assert job.args == [42, "42", "plain text", "NaN", "Grüße"] and job.kwargs == {"day": "monday", "flags": [1, 2]}

    # A row removed is a key removed; only the chosen kind's fields are read.
    response = submit(client, f"/jobs/{job.pk}/edit/", again, **{
        "kwargs-key": ["day"], "kwargs-value": ["friday"], "environment-key": ["IGNORED"],
        "environment-value": ["x"], "max_retries": "3"})
    assert response.status_code == 302
    job.refresh_from_db()
    assert job.kwargs == {"day": "friday"} and job.environment == {} and job.max_retries == 3
    assert AuditEntry.objects.filter(job=job, action="change").get().changes["max_retries"] == [0, 3]


def test_it_shows_the_apis_messages_next_to_each_field(people):
    client = browser(people.owner)
    form = form_of(client, "/jobs/new/")
    bad = {"name": "nightly-report", "target": "no.such.function", "schedule_type": "cron", "cron": "61 * * * *",
           "timezone": "Mars/Olympus", "timeout_seconds": "0", "sla_seconds": "soon"}

    response = submit(client, "/jobs/new/", form, **bad)

    assert response.status_code == 400 and not Job.objects.filter(target="no.such.function").exists()
    api = people.client(people.owner).post("/api/jobs/", {
        "name": "nightly-report", "kind": "callable", "target": "builtin.echo", "timeout_seconds": 0,
        "sla_seconds": "soon", "schedule": {"type": "cron", "cron": "61 * * * *", "timezone": "Mars/Olympus"},
    }, format="json").json()
    page = response.content.decode()
    for field, messages in [("name", api["name"]), ("timeout_seconds", api["timeout_seconds"]),
                            ("sla_seconds", api["sla_seconds"]), ("cron", api["schedule"]["cron"]),
                            ("timezone", api["schedule"]["timezone"])]:
        block = page.split(f'id="field-{field}"')[1].split('<div class="field')[0]
        for message in messages:
            assert f'<p class="field-error">{escape(message)}</p>' in block, (field, message)
    # What the model checks once the shape is right comes back per field too (the API's 400).
    response = submit(client, "/jobs/new/", form, name="new-one", target="no.such.function")
    target = response.content.decode().split('id="field-target"')[1].split('<div class="field')[0]
    assert "No registered function named &#x27;no.such.function&#x27;" in target
    # The rows are given back as typed, with what is wrong with them.
    response = submit(client, "/jobs/new/", form, name="new-one", target="builtin.echo",
                      **{"kwargs-key": ["", "day"], "kwargs-value": ["orphan", "monday"]})
    assert response.status_code == 400
    assert "Every row with a value needs a name (the row with the value &#x27;orphan&#x27;)." in response.content.decode()
    assert 'value="orphan"' in response.content.decode()


def test_secret_values_are_never_shown_and_kept_unless_replaced(people):
    client = browser(people.runner)  # command jobs need the runners' permission
    form = form_of(client, "/jobs/new/")
    response = submit(client, "/jobs/new/", form, name="deploy", kind="command", target="./deploy.sh",
                      **{"environment-key": ["STAGE"], "environment-value": ["prod"],
                         "secret_environment-key": ["TOKEN", "PASSWORD"],
                         "secret_environment-value": ["t0ken-value", "pa55word"]})
    assert response.status_code == 302
    job = Job.objects.get(name="deploy")
    assert secrets.reveal(job.secret_environment) == {"TOKEN": "t0ken-value", "PASSWORD": "pa55word"}

    page = client.get(f"/jobs/{job.pk}/edit/").content.decode()
    assert "t0ken-value" not in page and "pa55word" not in page and job.secret_environment["TOKEN"] not in page
    form = form_of(client, f"/jobs/{job.pk}/edit/")
    assert form["secret_environment-key"] == ["TOKEN", "PASSWORD", ""]
    assert form["secret_environment-value"] == [secrets.MASK, secrets.MASK, ""]

    # Sent back masked: kept. A new value replaces it; a removed row removes it.
    response = submit(client, f"/jobs/{job.pk}/edit/", form, **{
        "secret_environment-key": ["TOKEN", "API_KEY"], "secret_environment-value": [secrets.MASK, "k3y"]})
    assert response.status_code == 302
    job.refresh_from_db()
    assert secrets.reveal(job.secret_environment) == {"TOKEN": "t0ken-value", "API_KEY": "k3y"}
    assert job.environment == {"STAGE": "prod"}


def test_only_the_owner_and_their_group_may_open_or_change_a_job(people):
    job = people.job  # the owner's, shared with the group "team"
    outsider = browser(people.outsider)
    for url in (f"/jobs/{job.pk}/edit/", f"/jobs/{job.pk}/delete/"):
        assert outsider.get(url).status_code == 404
        assert outsider.post(url, {"name": "taken-over"}).status_code == 404
    assert outsider.post(f"/jobs/{job.pk}/clone/").status_code == 404
    job.refresh_from_db()
    assert job.name == "nightly-report" and Job.objects.count() == 1

    teammate = browser(people.teammate)
    assert teammate.get(f"/jobs/{job.pk}/edit/").status_code == 200

    # Every page of the forms asks for a login first.
    anonymous = Client()
    for url in ("/jobs/new/", f"/jobs/{job.pk}/edit/", f"/jobs/{job.pk}/delete/",
                "/jobs/schedule-preview/?schedule_type=manual"):
        response = anonymous.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert anonymous.post(f"/jobs/{job.pk}/clone/")["Location"].startswith("/accounts/login/")


def test_command_jobs_need_the_runners_permission_in_the_forms_as_in_the_api(people):
    shell = save_job(Job(name="shell", kind="command", target="true", owner=people.owner, group=people.team),
                     {"type": "manual"})
    owner = browser(people.owner)  # sees the job, but may not touch a command job
    assert owner.get(f"/jobs/{shell.pk}/edit/").status_code == 403
    assert owner.post(f"/jobs/{shell.pk}/clone/").status_code == 403
    assert owner.post(f"/jobs/{shell.pk}/delete/").status_code == 403

    form = form_of(owner, "/jobs/new/")
    response = submit(owner, "/jobs/new/", form, name="sneaky", kind="command", target="id")
    assert response.status_code == 403 and not Job.objects.filter(name="sneaky").exists()
    kind = response.content.decode().split('id="field-kind"')[1].split('<div class="field')[0]
    assert escape(COMMAND_JOBS_DENIED) in kind
    assert 'value="command"' not in kind  # said why, and still not offered

    runner = browser(people.runner)
    form = form_of(runner, f"/jobs/{shell.pk}/edit/")
    assert submit(runner, f"/jobs/{shell.pk}/edit/", form, target="echo changed").status_code == 302
    shell.refresh_from_db()
    assert shell.target == "echo changed"


def test_it_clones_a_job_paused_and_opens_the_copy_to_edit(people):
    client = browser(people.owner)
    response = client.post(f"/jobs/{people.job.pk}/clone/")
    copy = Job.objects.get(name="nightly-report (copy)")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{copy.pk}/edit/"
    assert not copy.enabled and copy.cron_expression == "0 3 * * *" and copy.owner == people.owner
    page = client.get(response["Location"]).content.decode()
    assert "nightly-report (copy) is a paused copy of nightly-report" in page
    assert AuditEntry.objects.get(job=copy).detail == "cloned from nightly-report"


def test_it_deletes_a_job_after_asking(people):
    client = browser(people.teammate)
    page = client.get(f"/jobs/{people.job.pk}/delete/").content.decode()
    assert "Delete nightly-report" in page and Job.objects.filter(pk=people.job.pk).exists()

    response = client.post(f"/jobs/{people.job.pk}/delete/")
    assert response.status_code == 302 and response["Location"] == "/jobs/"
    assert not Job.objects.filter(pk=people.job.pk).exists()
    assert "nightly-report is deleted" in client.get("/jobs/").content.decode()
    assert AuditEntry.objects.get(action="delete").actor == people.teammate

    # A job a workflow uses stays, and the page says why.
    step = save_job(Job(name="step", kind="callable", target="builtin.noop", owner=people.teammate),
                    {"type": "manual"})
    make_workflow("pipeline", ["step"], [])
    response = client.post(f"/jobs/{step.pk}/delete/", follow=True)
    assert "The job step is used by the workflow(s) pipeline: remove it from them first." in response.content.decode()
    assert Job.objects.filter(pk=step.pk).exists()


def test_a_group_set_by_staff_is_kept_when_its_owner_edits_the_job(people):
    job = people.job
    job.group = people.outsider.groups.get()  # "others": the owner is not a member
    job.save()
    client = browser(people.owner)
    form = form_of(client, f"/jobs/{job.pk}/edit/")
    assert form["group"] == ["others"]
    assert submit(client, f"/jobs/{job.pk}/edit/", form, description="changed").status_code == 302
    response = submit(client, f"/jobs/{job.pk}/edit/", form, group="staff-only")
    group = response.content.decode().split('id="field-group"')[1].split('<div class="field')[0]
    assert response.status_code == 400 and "Object with name=staff-only does not exist." in group
    job.refresh_from_db()
    assert (job.description, job.group.name) == ("changed", "others")


def test_the_schedule_preview_describes_it_and_lists_its_next_ten_slots(people):
    client = browser(people.outsider)
    cron = client.get("/jobs/schedule-preview/", {"schedule_type": "cron", "cron": "30 2 * * *",
                                                  "timezone": "America/New_York", "every_seconds": "ignored"}).json()
    assert cron["description"] == "At 02:30 AM (30 2 * * *, America/New_York)"
    assert cron["timezone"] == "America/New_York" and len(cron["slots"]) == 10
    assert all(" 02:30:00 " in slot for slot in cron["slots"])

    interval = client.get("/jobs/schedule-preview/", {"schedule_type": "interval", "every_seconds": "90"}).json()
    assert interval["description"] == "Every 90 seconds" and len(interval["slots"]) == 10

    wrong = client.get("/jobs/schedule-preview/", {"schedule_type": "interval", "every_seconds": "0"}).json()
    assert wrong == {"errors": {"every_seconds": ["Must be a whole number of seconds from 1 to 315360000."]}}
    never = client.get("/jobs/schedule-preview/", {"schedule_type": "cron", "cron": "0 0 31 2 *",
                                                   "timezone": "UTC"}).json()
    assert never["errors"]["cron"] == ["'0 0 31 2 *' never matches a date."]
    once = client.get("/jobs/schedule-preview/", {"schedule_type": "once", "run_at": "2020-01-01T00:00"}).json()
    assert once == {"errors": {"run_at": ["Must include a UTC offset or Z."]}}
    # Previewing writes nothing: no schedule rows for the expressions tried.
    assert not CrontabSchedule.objects.filter(hour="2", minute="30").exists()
    assert not IntervalSchedule.objects.filter(every=90).exists()


def test_an_http_jobs_headers_and_accepted_statuses_go_round_the_form(people, local_http_allowed):
    client = browser(people.owner)
    form = form_of(client, "/jobs/new/")
    response = submit(client, "/jobs/new/", form, name="ping", kind="http", target="http://127.0.0.1:9/ping",
                      http_method="POST", http_body='\n{"hello": "world"}', http_ok_statuses="200, 204",
                      **{"http_headers-key": ["Content-Type"], "http_headers-value": ["application/json"],
                         "secret_http_headers-key": ["Authorization"],
                         "secret_http_headers-value": ["Bearer s3cr3t"]})
    assert response.status_code == 302
    job = Job.objects.get(name="ping")
    assert (job.http_method, job.http_body, job.http_ok_statuses) == ("POST", '\n{"hello": "world"}', [200, 204])
    assert job.http_headers == {"Content-Type": "application/json"}
    assert secrets.reveal(job.secret_http_headers) == {"Authorization": "Bearer s3cr3t"}

    form = form_of(client, f"/jobs/{job.pk}/edit/")
    assert form["http_ok_statuses"] == ["200, 204"] and form["http_body"] == ['\n{"hello": "world"}']
    assert form["http_headers-key"] == ["Content-Type", ""]
    assert form["secret_http_headers-value"] == [secrets.MASK, ""]
    assert "s3cr3t" not in client.get(f"/jobs/{job.pk}/edit/").content.decode()
    response = submit(client, f"/jobs/{job.pk}/edit/", form, http_ok_statuses="200, 999")
    field = response.content.decode().split('id="field-http_ok_statuses"')[1].split('<div class="field')[0]
    assert response.status_code == 400 and "Must be a list of HTTP status codes (100-599)." in field
    assert submit(client, f"/jobs/{job.pk}/edit/", form).status_code == 302
    job.refresh_from_db()
    assert secrets.reveal(job.secret_http_headers) == {"Authorization": "Bearer s3cr3t"}


def kind_options(client, url):
    """The values the page's kind select offers."""
    response = client.get(url)
    assert response.status_code == 200
    select = re.search(r'<select[^>]*name="kind"[^>]*>(.*?)</select>', response.content.decode(), re.S)
    assert select, "no kind select on the page"
    return re.findall(r'<option[^>]*value="([^"]*)"', select.group(1))


def test_it_offers_shell_commands_only_to_those_who_may_create_them(people):
    may_not = kind_options(browser(people.teammate), "/jobs/new/")
    assert "callable" in may_not and "http" in may_not and "command" not in may_not
    may = kind_options(browser(people.runner), "/jobs/new/")
    assert "command" in may and set(may_not) < set(may)

    # Editing their own command job, a runner keeps it on offer; a user without the permission is
    # refused the page (and still offered no command for a job of theirs).
    mine = save_job(Job(name="cleanup", kind="command", target="true", owner=people.runner, group=people.team),
                    {"type": "manual"})
    assert "command" in kind_options(browser(people.runner), f"/jobs/{mine.pk}/edit/")
    assert browser(people.teammate).get(f"/jobs/{mine.pk}/edit/").status_code in (403, 404)
    assert "command" not in kind_options(browser(people.teammate), f"/jobs/{people.job.pk}/edit/")


def test_parameters_are_rows_that_write_the_apis_declarations(people):
    client = browser(people.owner)
    form = form_of(client, "/jobs/new/")
    assert form["parameters-name"] == [""] and form["parameters-type"] == ["string"]  # one empty row
    response = submit(client, "/jobs/new/", form, name="report", target="builtin.echo", **{
        "parameters-name": ["day", "n", "mode", ""], "parameters-type": ["date", "integer", "choice", "string"],
        "parameters-default": ["2026-11-01", "3", "", ""], "parameters-required": ["", "", "required", ""],
        "parameters-description": ["The day", "", "", ""], "parameters-choices": ["", "", "fast, full", ""]})
    assert response.status_code == 302
    job = Job.objects.get(name="report")
    api = people.client(people.owner).get(f"/api/jobs/{job.pk}/").json()["parameters"]
    assert api == job.parameters == [
        {"name": "day", "type": "date", "default": "2026-11-01", "required": False, "description": "The day",
         "choices": []},
        {"name": "n", "type": "integer", "default": 3, "required": False, "description": "", "choices": []},
        {"name": "mode", "type": "choice", "default": None, "required": True, "description": "",
         "choices": ["fast", "full"]}]

    again = form_of(client, f"/jobs/{job.pk}/edit/")
    assert again["parameters-name"] == ["day", "n", "mode", ""] and again["parameters-default"][:2] == ["2026-11-01", "3"]
    assert again["parameters-required"] == ["", "", "required", ""] and again["parameters-choices"][2] == "fast, full"
    assert submit(client, f"/jobs/{job.pk}/edit/", again).status_code == 302
    assert AuditEntry.objects.filter(job=job).count() == 1  # unchanged: no entry

    # A bad row: the API's message, and the rows as typed.
    response = submit(client, f"/jobs/{job.pk}/edit/", again, **{
        "parameters-name": ["day", "1n"], "parameters-type": ["date", "integer"], "parameters-default": ["nope", "x"],
        "parameters-required": ["", ""], "parameters-description": ["", ""], "parameters-choices": ["", ""]})
    assert response.status_code == 400
    text = response.content.decode()
    api = people.client(people.owner).patch(f"/api/jobs/{job.pk}/", {"parameters": [
        {"name": "day", "type": "date", "default": "nope"}, {"name": "1n", "type": "integer", "default": "x"}]},
        format="json").json()["parameters"]
    assert all(escape(message) in text for message in api), api
    assert 'value="1n"' in text and 'value="nope"' in text
    job.refresh_from_db()
    assert [item["name"] for item in job.parameters] == ["day", "n", "mode"]

    # Every row removed: no parameters.
    none = {f"parameters-{part}": [""] for part in ("name", "default", "required", "description", "choices")}
    assert submit(client, f"/jobs/{job.pk}/edit/", again, **none, **{"parameters-type": ["string"]}).status_code == 302
    job.refresh_from_db()
    assert job.parameters == []
