"""Run-time parameters without workers: declarations checked by the model (through the API), values
checked when a run is asked for (a 400 naming the parameter and the rule, nothing queued), the
values recorded on the run and in the audit trail, the runs list filtered on them, and the
placeholders of an HTTP job encoded for their place."""

import json
import re

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError
from django.test import override_settings

from audit.models import Action, AuditEntry
from jobs import parameters
from jobs.definitions.jobs import save_job
from jobs.kinds.http import placeholders
from jobs.models import Job, JobRun, RunTrigger

from .api_personas import browser
from .conftest import command_output
from .test_job_forms import FormReader, form_of, submit

pytestmark = pytest.mark.django_db

REPORT_PARAMETERS = [
    {"name": "day", "type": "date", "required": True, "description": "The day to report on."},
    {"name": "customer", "type": "integer", "default": 42},
    {"name": "ratio", "type": "number", "default": 0.5},
    {"name": "dry", "type": "boolean", "default": False},
    {"name": "region", "type": "choice", "choices": ["eu", "us"], "default": "eu"},
    {"name": "since", "type": "datetime"},
    {"name": "note", "type": "string"},
]


@pytest.fixture
def report(people):
    """A manual job of the owner's declaring every type of parameter."""
    return save_job(Job(name="report", kind="callable", target="builtin.echo", owner=people.owner,
                        parameters=REPORT_PARAMETERS), {"type": "manual"})


def create(client, **fields):
    body = {"name": "p", "kind": "callable", "target": "builtin.echo", "schedule": {"type": "manual"}, **fields}
    return client.post("/api/jobs/", body, format="json")


# --- declarations


def test_it_stores_a_declaration_normalised(people):
    answer = create(people.client(people.owner), parameters=[{"name": "day", "type": "date", "default": "2026-11-01"},
                                                             {"name": "n", "type": "number", "default": "3"}])
    assert answer.status_code == 201, answer.json()
    assert answer.json()["parameters"] == [
        {"name": "day", "type": "date", "default": "2026-11-01", "required": False, "description": "", "choices": []},
        {"name": "n", "type": "number", "default": 3.0, "required": False, "description": "", "choices": []},
    ]


@pytest.mark.parametrize(("declared", "words"), [
    ("day", "Must be a JSON list"),
    ([{"type": "string"}], "needs a name"),
    ([{"name": "1day", "type": "string"}], "must be an identifier"),
    ([{"name": "day-of", "type": "string"}], "must be an identifier"),
    ([{"name": "class", "type": "string"}], "must be an identifier"),
    ([{"name": "$(rm -rf /)", "type": "string"}], "must be an identifier"),
    ([{"name": "x" * 65, "type": "string"}], "at most 64 characters"),
    ([{"name": "context", "type": "string"}], "reserved"),
    ([{"name": "day", "type": "date"}, {"name": "DAY", "type": "date"}], "declared twice"),
    ([{"name": "day", "type": "calendar"}], "type must be one of"),
    ([{"name": "day", "type": "date", "default": "2026-13-01"}], "the default does not fit"),
    ([{"name": "n", "type": "integer", "default": "ten"}], "the default does not fit"),
    ([{"name": "n", "type": "integer", "default": 2**60}], "the default does not fit"),
    ([{"name": "r", "type": "choice"}], "a choice needs choices"),
    ([{"name": "r", "type": "choice", "choices": ["a", "a"]}], "listed twice"),
    ([{"name": "r", "type": "choice", "choices": ["a"], "default": "b"}], "must be one of a"),
    ([{"name": "r", "type": "string", "choices": ["a"]}], "for the choice type only"),
    ([{"name": "r", "type": "string", "required": "yes"}], "required must be true or false"),
    ([{"name": "r", "type": "string", "secret": True}], "unknown key"),
    ([{"name": "r", "type": "string", "description": "d" * 1001}], "at most 1000 characters"),
    ([{"name": f"p{i}", "type": "string"} for i in range(51)], "At most 50 parameters"),
    ([{"name": "api_token", "type": "string"}], "secrets are never parameters"),
    ([{"name": "db_password", "type": "string"}], "secrets are never parameters"),
])
def test_it_refuses_a_bad_declaration_naming_the_rule(people, declared, words):
    answer = create(people.client(people.owner), parameters=declared)
    assert answer.status_code == 400
    assert words in json.dumps(answer.json()["parameters"]), answer.json()
    assert not Job.objects.filter(name="p").exists()


def test_a_scheduled_job_needs_a_default_for_each_required_parameter(people):
    answer = create(people.client(people.owner), schedule={"type": "interval", "every_seconds": 3600},
                    parameters=[{"name": "day", "type": "date", "required": True}])
    assert answer.status_code == 400
    assert "day: required with no default" in answer.json()["parameters"][0]


def test_no_parameter_takes_the_name_of_a_secret_of_the_job(people):
    answer = create(people.client(people.runner), kind="command", target="echo hi",
                    secret_environment={"ACCOUNT_ID": "s3cr3t"},
                    parameters=[{"name": "account_id", "type": "string"}])
    assert answer.status_code == 400
    assert "secrets are never parameters" in answer.json()["parameters"][0]


def test_a_command_parameter_may_not_shadow_the_environment(people):
    answer = create(people.client(people.runner), kind="command", target="echo hi",
                    environment={"JOB_PARAM_DAY": "x"}, parameters=[{"name": "day", "type": "date"}])
    assert answer.status_code == 400
    assert "JOB_PARAM_DAY" in answer.json()["parameters"][0]


@override_settings(JOBS_HTTP_ALLOWED_NETWORKS=["127.0.0.0/8"])
@pytest.mark.parametrize(("fields", "field", "words"), [
    ({"target": "http://127.0.0.1/r/{{params.month}}"}, "target", "{{params.month}} names no declared parameter"),
    ({"http_body": '{"d": {{ params.nope }}}'}, "http_body", "{{params.nope}} names no declared parameter"),
    ({"target": "http://{{params.day}}.example.com/"}, "target", "not its scheme, host or port"),
    ({"http_headers": {"X-Day": "{{params.day}}"}}, "http_headers", "Headers take no"),
])
def test_an_http_placeholder_must_name_a_declared_parameter_in_its_place(people, fields, field, words):
    body = {"kind": "http", "target": "http://127.0.0.1/r/{{params.day}}",
            "parameters": [{"name": "day", "type": "date"}], **fields}
    answer = create(people.client(people.owner), **body)
    assert answer.status_code == 400
    assert words in json.dumps(answer.json()[field]), answer.json()


# --- values


def test_run_now_records_the_values_coerced_with_the_defaults_filled(people, report):
    answer = people.client(people.owner).post(
        f"/api/jobs/{report.pk}/run/", {"params": {"day": "2026-11-01", "customer": "7", "dry": "yes",
                                                   "since": "2026-11-01T09:30:00+01:00"}}, format="json")
    assert answer.status_code == 202, answer.json()
    expected = {"day": "2026-11-01", "customer": 7, "ratio": 0.5, "dry": True, "region": "eu",
                "since": "2026-11-01T08:30:00+00:00"}
    assert answer.json()["params"] == expected
    run = JobRun.objects.get(pk=answer.json()["id"])
    assert run.params == expected and run.trigger == RunTrigger.MANUAL
    assert people.client(people.owner).get(f"/api/runs/{run.pk}/").json()["params"] == expected
    entry = AuditEntry.objects.get(action=Action.RUN_NOW, run=run)
    assert entry.changes == {"params": [None, expected]}


@pytest.mark.parametrize(("given", "name", "words"), [
    ({"day": "2026-11-01", "color": "red"}, "color", "Unknown parameter 'color'"),
    ({}, "day", "day is required"),
    ({"day": "01/11/2026"}, "day", "must be a date, YYYY-MM-DD"),
    ({"day": "2026-02-30"}, "day", "must be a date"),
    ({"day": "2026-11-01", "customer": "4.5"}, "customer", "must be a whole number"),
    ({"day": "2026-11-01", "customer": True}, "customer", "must be a whole number"),
    ({"day": "2026-11-01", "customer": 10**20}, "customer", "must be between"),
    ({"day": "2026-11-01", "ratio": "NaN"}, "ratio", "must be a finite number"),
    ({"day": "2026-11-01", "dry": "maybe"}, "dry", "must be true or false"),
    ({"day": "2026-11-01", "region": "mars"}, "region", "must be one of eu, us"),
    ({"day": "2026-11-01", "since": "2026-11-01T09:30:00"}, "since", "must include a UTC offset"),
    ({"day": "2026-11-01", "note": "x" * 5000}, "note", "at most 4096 characters"),
    ({"day": "2026-11-01", "note": "a\x00b"}, "note", "must not contain NUL"),
    ({"day": "2026-11-01", "note": ["$(rm -rf /)"]}, "note", "must be text"),
])
def test_a_bad_value_is_a_400_naming_the_parameter_and_nothing_is_queued(people, report, given, name, words):
    answer = people.client(people.owner).post(f"/api/jobs/{report.pk}/run/", {"params": given}, format="json")
    assert answer.status_code == 400
    assert words in " ".join(answer.json()["params"][name]), answer.json()
    assert not JobRun.objects.exists()
    assert not AuditEntry.objects.filter(action=Action.RUN_NOW).exists()


def test_params_that_are_not_an_object_are_a_400(people, report):
    client = people.client(people.owner)
    for body in ({"params": ["day=2026-11-01"]}, {"params": "day=2026-11-01"}):
        answer = client.post(f"/api/jobs/{report.pk}/run/", body, format="json")
        assert answer.status_code == 400 and "params" in answer.json()
    misspelt = client.post(f"/api/jobs/{report.pk}/run/", {"param": {"day": "2026-11-01"}}, format="json")
    assert misspelt.status_code == 400 and misspelt.json() == {"param": ["Unknown key: the body takes params only."]}
    listed = client.post(f"/api/jobs/{report.pk}/run/", [{"day": "2026-11-01"}], format="json")
    assert listed.status_code == 400 and "must be a JSON object" in listed.json()["non_field_errors"][0]
    huge = client.post(f"/api/jobs/{report.pk}/run/", {"params": {f"k{i}": "x" * 4000 for i in range(100)}},
                       format="json")
    assert huge.status_code == 413
    assert not JobRun.objects.exists()


def test_values_larger_than_16_kb_together_are_refused(people):
    job = save_job(Job(name="wide", kind="callable", target="builtin.echo", owner=people.owner,
                       parameters=[{"name": f"text{i}", "type": "string"} for i in range(5)]), {"type": "manual"})
    answer = people.client(people.owner).post(f"/api/jobs/{job.pk}/run/",
                                              {"params": {f"text{i}": "x" * 4000 for i in range(5)}}, format="json")
    assert answer.status_code == 400
    assert answer.json()["params"] == ["The values are larger than 16 KB together."]
    assert not JobRun.objects.exists()


def test_manage_py_jobs_run_and_backfill_take_params(report):
    command_output("jobs", "run", "report", "--param", "day=2026-11-01", "--param", "region=us")
    run = JobRun.objects.get()
    assert run.params["day"] == "2026-11-01" and run.params["region"] == "us"
    with pytest.raises(CommandError, match="params.day: day must be a date"):
        command_output("jobs", "run", "report", "--param", "day=soon")
    with pytest.raises(CommandError, match="give name=value"):
        command_output("jobs", "run", "report", "--param", "day")
    assert JobRun.objects.count() == 1


def test_another_users_job_cannot_be_run_with_params(people, report):
    answer = people.client(people.outsider).post(f"/api/jobs/{report.pk}/run/", {"params": {"day": "2026-11-01"}},
                                                 format="json")
    assert answer.status_code == 404
    assert not JobRun.objects.exists()


def test_a_job_without_parameters_refuses_any_value(people):
    answer = people.client(people.owner).post(f"/api/jobs/{people.job.pk}/run/", {"params": {"day": "x"}},
                                              format="json")
    assert answer.status_code == 400
    assert "the job declares none" in answer.json()["params"]["day"][0]
    plain = people.client(people.owner).post(f"/api/jobs/{people.job.pk}/run/", {}, format="json")
    assert plain.status_code == 202 and plain.json()["params"] == {}


# --- scheduled runs and backfill


def test_scheduled_runs_take_the_defaults(people):
    from jobs.scheduling.dispatch import dispatch_due
    from jobs.timing import clock

    job = save_job(Job(name="hourly", kind="callable", target="builtin.echo", owner=people.owner,
                       parameters=[{"name": "region", "type": "choice", "choices": ["eu", "us"], "default": "us"},
                                   {"name": "note", "type": "string"}]),
                   {"type": "interval", "every_seconds": 60})
    Job.objects.filter(pk=job.pk).update(next_run_at=clock.now())
    dispatch_due()
    run = JobRun.objects.get(job=job)
    assert run.trigger == RunTrigger.SCHEDULE
    assert run.params == {"region": "us"}


def test_backfill_gives_each_slots_run_the_values(people):
    job = save_job(Job(name="daily", kind="callable", target="builtin.echo", owner=people.owner,
                       parameters=[{"name": "customer", "type": "integer", "default": 1}]),
                   {"type": "cron", "cron": "0 3 * * *", "timezone": "UTC"})
    client = people.client(people.owner)
    refused = client.post(f"/api/jobs/{job.pk}/backfill/", {"start": "2026-01-01T00:00:00Z",
                                                            "end": "2026-01-04T00:00:00Z",
                                                            "params": {"customer": "many"}}, format="json")
    assert refused.status_code == 400 and "customer" in refused.json()["params"]
    assert not JobRun.objects.filter(job=job).exists()
    answer = client.post(f"/api/jobs/{job.pk}/backfill/", {"start": "2026-01-01T00:00:00Z",
                                                           "end": "2026-01-04T00:00:00Z",
                                                           "params": {"customer": 42}}, format="json")
    assert answer.status_code == 202, answer.json()
    runs = JobRun.objects.filter(job=job)
    assert len(answer.json()["created"]) == 3 == runs.count()
    assert {run.trigger for run in runs} == {RunTrigger.BACKFILL}
    assert [run.params for run in runs] == [{"customer": 42}] * 3
    entry = AuditEntry.objects.get(action=Action.BACKFILL, job=job)
    assert entry.changes == {"params": [None, {"customer": 42}]}


# --- the runs list, filtered on values


def test_the_runs_list_filters_on_a_parameters_value(people, report):
    client = people.client(people.owner)
    made = {}
    for day, customer in (("2026-11-01", 1), ("2026-11-01", 2), ("2026-11-02", 1)):
        answer = client.post(f"/api/jobs/{report.pk}/run/", {"params": {"day": day, "customer": customer}},
                             format="json")
        made[(day, customer)] = answer.json()["id"]

    def ids(query):
        answer = client.get(f"/api/runs/?job={report.pk}&{query}")
        assert answer.status_code == 200, answer.json()
        return sorted(run["id"] for run in answer.json()["results"])

    assert ids("param.day=2026-11-01") == sorted([made[("2026-11-01", 1)], made[("2026-11-01", 2)]])
    assert ids("param.day=2026-11-01&param.customer=1") == [made[("2026-11-01", 1)]]
    assert ids("param.customer=%2B1") == sorted([made[("2026-11-01", 1)], made[("2026-11-02", 1)]])
    assert ids("param.region=eu") == sorted(made.values())
    assert ids("param.dry=false") == sorted(made.values())
    assert ids("param.day=2026-11-03") == []


@pytest.mark.parametrize(("query", "key", "words"), [
    ("param.day=2026-11-01", "param.day", "needs job=<id>"),
    ("job={job}&param.color=red", "param.color", "declares no parameter 'color'"),
    ("job={job}&param.day=yesterday", "param.day", "must be a date"),
    ("job={job}&param.day=x')%20OR%201=1--", "param.day", "must be a date"),
    ("job={job}&param.note__contains=x", "param.note__contains", "declares no parameter"),
])
def test_a_bad_parameter_filter_is_a_400(people, report, query, key, words):
    answer = people.client(people.owner).get("/api/runs/?" + query.format(job=report.pk))
    assert answer.status_code == 400
    assert words in answer.json()[key][0], answer.json()


def test_a_filter_on_another_users_job_finds_nothing(people, report):
    people.client(people.owner).post(f"/api/jobs/{report.pk}/run/", {"params": {"day": "2026-11-01"}}, format="json")
    answer = people.client(people.outsider).get(f"/api/runs/?job={report.pk}&param.day=2026-11-01")
    assert answer.status_code == 200 and answer.json()["results"] == []


def test_a_parameter_named_like_a_lookup_is_a_key():
    """A parameter named "contains" is filtered as the key params -> 'contains', not as a lookup."""
    job = save_job(Job(name="lookups", kind="callable", target="builtin.echo",
                       parameters=[{"name": "contains", "type": "string"}]), {"type": "manual"})
    from jobs import lifecycle
    from jobs.api.views import with_params

    wanted = lifecycle.create_run(job, params={"contains": "a"})
    lifecycle.create_run(job, params={"contains": "b"})
    from django.contrib.auth.models import User

    staff = User.objects.create_user("boss", is_staff=True)
    found = with_params(JobRun.objects.all(), staff, {"job": str(job.pk)}, {"contains": "a"})
    assert [run.pk for run in found] == [wanted.pk]


# --- what each kind makes of them


def test_a_function_gets_dates_and_datetimes_as_python_objects():
    declared = parameters.checked_declaration(REPORT_PARAMETERS)
    values = parameters.resolve(declared, {"day": "2026-11-01", "since": "2026-11-01T09:30:00Z"})
    python = parameters.as_python(declared, values)
    assert python["day"].isoformat() == "2026-11-01"
    assert python["since"].isoformat() == "2026-11-01T09:30:00+00:00"
    assert parameters.environment(values) == {
        "JOB_PARAM_DAY": "2026-11-01", "JOB_PARAM_CUSTOMER": "42", "JOB_PARAM_RATIO": "0.5",
        "JOB_PARAM_DRY": "false", "JOB_PARAM_REGION": "eu", "JOB_PARAM_SINCE": "2026-11-01T09:30:00+00:00"}


def test_http_placeholders_are_encoded_for_their_place():
    job = Job(kind="http", target="http://h.test/r/{{params.who}}/x?q={{params.who}}&n={{params.n}}",
              http_body='{"who": {{params.who}}, "n": {{ params.n }}, "none": {{params.absent}}}',
              parameters=[{"name": "who", "type": "string"}, {"name": "n", "type": "integer"},
                          {"name": "absent", "type": "string"}])
    values = {"who": "a/b c&d=e\"", "n": 5}
    assert placeholders.url(job.target, values) == "http://h.test/r/a%2Fb%20c%26d%3De%22/x?q=a%2Fb+c%26d%3De%22&n=5"
    assert json.loads(placeholders.body(job, values)) == {"who": "a/b c&d=e\"", "n": 5, "none": None}
    assert placeholders.url("http://h.test/r/{{params.who}}", {"who": ".."}) == "http://h.test/r/%2E%2E"
    job.http_body, job.http_headers = "who={{params.who}}", {"Content-Type": "application/x-www-form-urlencoded"}
    assert placeholders.body(job, values) == "who=a%2Fb+c%26d%3De%22"
    job.http_body, job.http_headers = "Hello {{params.who}}", {}
    assert placeholders.body(job, values) == 'Hello a/b c&d=e"'


# --- the pages and the admin


class RunFormReader(FormReader):
    """The (name, value) pairs a browser sends for the run-now form."""

    def handle_starttag(self, tag, attrs):
        if tag == "form" and dict(attrs).get("id") == "run-form":
            attrs = [*attrs, ("data-job-form", "")]
        super().handle_starttag(tag, attrs)


def run_form_of(client, url):
    response = client.get(url)
    assert response.status_code == 200
    reader = RunFormReader()
    reader.feed(response.content.decode())
    return {name: [value] for name, value in reader.pairs}


def test_the_run_now_button_of_a_job_with_parameters_leads_to_their_form(people, report):
    client = browser(people.owner)
    page = client.get(f"/jobs/{report.pk}/").content.decode()
    assert f'id="run-now" href="/jobs/{report.pk}/run/"' in page
    assert 'id="job-parameters"' in page and "<dt>region</dt><dd>choice of eu, us, default <code>eu</code>" in page
    plain = client.get(f"/jobs/{people.job.pk}/").content.decode()
    assert f'<form method="post" action="/jobs/{people.job.pk}/run/">' in plain

    form = run_form_of(client, f"/jobs/{report.pk}/run/")
    assert {name: value for name, value in form.items() if name.startswith("param-")} == {"param-day": [""], "param-customer": ["42"], "param-ratio": ["0.5"], "param-dry": ["false"],
                    "param-region": ["eu"], "param-since": [""], "param-note": [""]}
    assert "The day to report on." in client.get(f"/jobs/{report.pk}/run/").content.decode()
    assert browser(people.outsider).get(f"/jobs/{report.pk}/run/").status_code == 404
    assert browser(people.outsider).post(f"/jobs/{report.pk}/run/", {"param-day": "2026-11-01"}).status_code == 404


def test_the_run_form_shows_a_bad_value_on_its_input_and_queues_nothing(people, report):
    client = browser(people.owner)
    form = run_form_of(client, f"/jobs/{report.pk}/run/")
    refused = submit(client, f"/jobs/{report.pk}/run/", form, **{"param-day": "2026-13-01", "param-customer": "lots"})
    assert refused.status_code == 400
    reader = refused.content.decode()
    assert reader.index('id="param-field-day"') < reader.index("day must be a date") < reader.index(
        'id="param-field-customer"') < reader.index("customer must be a whole number")
    assert 'value="lots"' in reader  # what was typed comes back
    assert not JobRun.objects.exists()

    done = submit(client, f"/jobs/{report.pk}/run/", form, **{"param-day": "2026-11-01", "param-note": "$(id)"})
    run = JobRun.objects.get()
    assert done.status_code == 302 and done["Location"] == f"/runs/{run.pk}/"
    assert run.params == {"day": "2026-11-01", "customer": 42, "ratio": 0.5, "dry": False, "region": "eu",
                          "note": "$(id)"}
    shown = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-params"' in shown and "<dt>note</dt><dd><code>$(id)</code></dd>" in shown
    assert AuditEntry.objects.get(action=Action.RUN_NOW).source == "page"


def test_the_backfill_page_gives_each_run_the_values(people):
    job = save_job(Job(name="daily", kind="callable", target="builtin.echo", owner=people.owner,
                       parameters=[{"name": "customer", "type": "integer", "default": 1}]),
                   {"type": "cron", "cron": "0 3 * * *", "timezone": "UTC"})
    client = browser(people.owner)
    assert "param-customer" in client.get(f"/jobs/{job.pk}/backfill/").content.decode()
    rng = {"from": "2026-01-01T00:00", "to": "2026-01-03T00:00"}
    refused = client.post(f"/jobs/{job.pk}/backfill/", {**rng, "param-customer": "x"})
    assert "customer must be a whole number" in refused.content.decode()
    preview = client.post(f"/jobs/{job.pk}/backfill/", {**rng, "param-customer": "42"}).content.decode()
    assert '<input type="hidden" name="param-customer" value="42">' in preview
    assert not JobRun.objects.exists()
    done = client.post(f"/jobs/{job.pk}/backfill/", {**rng, "param-customer": "42", "confirm": "1"})
    assert done.status_code == 302
    assert [run.params for run in JobRun.objects.all()] == [{"customer": 42}] * 2


def test_the_runs_page_filters_on_the_chosen_jobs_parameters(people, report):
    client = people.client(people.owner)
    first = client.post(f"/api/jobs/{report.pk}/run/", {"params": {"day": "2026-11-01"}}, format="json").json()["id"]
    client.post(f"/api/jobs/{report.pk}/run/", {"params": {"day": "2026-11-02"}}, format="json")
    pages = browser(people.owner)
    listed = pages.get(f"/runs/?job={report.pk}&param.day=2026-11-01").content.decode()
    assert 'name="param.day" value="2026-11-01"' in listed
    assert sorted(set(re.findall(r'href="/runs/(\d+)/"', listed))) == [str(first)]
    bad = pages.get(f"/runs/?job={report.pk}&param.day=soon").content.decode()
    assert "day must be a date" in bad and not re.findall(r'href="/runs/(\d+)/"', bad)


def test_the_admin_action_runs_one_job_with_the_values_given(people, report):
    admin = browser(people.staff)
    people.staff.is_superuser = True
    people.staff.save()
    url = "/admin/jobs/job/"
    asked = admin.post(url, {"action": "run_with_parameters", "_selected_action": [report.pk]})
    assert asked.status_code == 200 and 'name="param-day"' in asked.content.decode()
    refused = admin.post(url, {"action": "run_with_parameters", "_selected_action": [report.pk], "apply": "1",
                               "param-region": "mars"})
    text = refused.content.decode()
    assert "region must be one of eu, us" in text and "day is required" in text
    assert not JobRun.objects.exists()
    done = admin.post(url, {"action": "run_with_parameters", "_selected_action": [report.pk], "apply": "1",
                            "param-day": "2026-11-01", "param-region": "us"})
    assert done.status_code == 302
    run = JobRun.objects.get()
    assert run.params["region"] == "us" and run.params["day"] == "2026-11-01"
    assert AuditEntry.objects.get(action=Action.RUN_NOW).source == "admin"
    shown = admin.get(f"/admin/jobs/jobrun/{run.pk}/change/").content.decode()
    assert "Params:" in shown and "2026-11-01" in shown


def test_the_job_form_edits_the_declaration_as_rows(people, report):
    client = browser(people.owner)
    form = form_of(client, f"/jobs/{report.pk}/edit/")
    assert form["parameters-name"] == [item["name"] for item in REPORT_PARAMETERS] + [""]  # and an empty row
    assert submit(client, f"/jobs/{report.pk}/edit/", form).status_code == 302
    report.refresh_from_db()
    assert report.parameters == save_job(Job(name="again", kind="callable", target="builtin.echo",
                                             parameters=REPORT_PARAMETERS), {"type": "manual"}).parameters
    one = {"parameters-name": ["x"], "parameters-type": ["color"], "parameters-default": [""],
           "parameters-required": [""], "parameters-description": [""], "parameters-choices": [""]}
    bad = submit(client, f"/jobs/{report.pk}/edit/", form, **one)
    assert bad.status_code == 400 and "type must be one of" in bad.content.decode()
    done = submit(client, f"/jobs/{report.pk}/edit/", form, **{**one, "parameters-type": ["integer"]})
    assert done.status_code == 302
    report.refresh_from_db()
    assert report.parameters == [{"name": "x", "type": "integer", "default": None, "required": False,
                                  "description": "", "choices": []}]


# --- jobs as code


JOBS_FILE = """\
jobs:
  - name: report
    kind: callable
    target: builtin.echo
    schedule: {type: cron, cron: "0 3 * * *", timezone: UTC}
    parameters:
      - {name: day, type: date, default: "2026-01-01"}
      - {name: customer, type: integer}
workflows:
  - name: nightly
    nodes: [report]
    edges: []
    schedule: {type: manual}
    params:
      report: {customer: "9"}
"""


def test_a_file_declares_parameters_and_a_workflow_steps_values_and_applies_again_unchanged(tmp_path):
    path = tmp_path / "jobs.yml"
    path.write_text(JOBS_FILE)
    command_output("jobs", "apply", str(path))
    job = Job.objects.get(name="report")
    assert job.parameters == [
        {"name": "day", "type": "date", "default": "2026-01-01", "required": False, "description": "", "choices": []},
        {"name": "customer", "type": "integer", "default": None, "required": False, "description": "",
         "choices": []}]
    from workflows.models import Workflow

    assert Workflow.objects.get(name="nightly").step_params == {"report": {"customer": 9}}

    again = command_output("jobs", "apply", str(path))
    assert "= unchanged: 1" in again and "~" not in again

    exported = tmp_path / "exported.yml"
    command_output("jobs", "export", str(exported))
    assert "parameters:" in exported.read_text() and "params:" in exported.read_text()
    path.write_text(JOBS_FILE.replace('{customer: "9"}', '{customer: "nine"}'))
    with pytest.raises(CommandError, match="report: params.customer: customer must be a whole number"):
        command_output("jobs", "apply", str(path))


def test_the_workflow_page_shows_each_steps_values(people, report):
    from workflows.definitions import parse_graph, save_workflow
    from workflows.models import Workflow

    workflow = save_workflow(Workflow(name="monthly", owner=people.owner), {"type": "manual"},
                             parse_graph(["report"], [], {"report": report}, {"report": {"day": "2026-11-01"}}))
    page = browser(people.owner).get(f"/workflows/{workflow.pk}/").content.decode()
    assert 'id="step-params"' in page and "<code>day=2026-11-01</code>" in page
    assert people.client(people.owner).get(f"/api/workflows/{workflow.pk}/").json()["params"] == {
        "report": {"day": "2026-11-01"}}
    with pytest.raises(ValidationError, match="report: params.region: region must be one of eu, us"):
        parse_graph(["report"], [], {"report": report}, {"report": {"region": "mars"}})
    with pytest.raises(ValidationError, match="'other' is not one of the workflow's nodes"):
        parse_graph(["report"], [], {"report": report}, {"other": {"x": 1}})
