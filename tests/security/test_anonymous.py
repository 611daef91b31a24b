"""Without credentials, nothing but the login pages answers: every pattern of the URL configuration
(walked, not listed by hand), with its ids filled in with real objects, by GET and by POST, with no
credentials and with a bogus token. Static files (WhiteNoise, outside the URL configuration) are
public, and so are a check-in job's ping URLs (their uuid is the secret). Nothing changes on the way."""

import re

import pytest
from django.contrib.auth.models import Group, User
from django.urls import URLPattern, URLResolver, get_resolver

from audit.models import AuditEntry
from jobs.models import Job, JobRun
from notifications.models import Channel, Rule
from workflows.models import Workflow, WorkflowRun

from ..work_trail import work_entries

# favicon: a static file; sso: single sign-on's way in (404 while it is off, as in these tests).
PUBLIC = {"pages:login", "pages:logout", "admin:login", "admin:logout", "favicon", "sso:authenticate", "sso:callback"}
LOGIN_PAGES = ("/accounts/login/", "/admin/login/")
# The pages' and the API's URL names, by the model their id belongs to.
MODELS_BY_NAME = [("workflow-run", WorkflowRun), ("workflow-pages:rerun", WorkflowRun),
                  ("workflow-pages:cancel", WorkflowRun), ("workflow", Workflow), ("run", JobRun),
                  ("channel", Channel), ("job", Job)]


def walk(patterns, prefix="", namespace=None):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = ":".join(filter(None, [namespace, pattern.namespace])) or None
            yield from walk(pattern.url_patterns, prefix + str(pattern.pattern), inner)
        elif isinstance(pattern, URLPattern):
            name = f"{namespace}:{pattern.name}" if namespace and pattern.name else pattern.name
            yield prefix + str(pattern.pattern), name, pattern


def model_of(name, pattern):
    model_admin = getattr(pattern.callback, "model_admin", None)
    if model_admin is not None:
        return model_admin.model
    for part, model in MODELS_BY_NAME:
        if name and part in name:
            return model
    return None


def concrete(route, name, pattern):
    """The route with every parameter filled in: ids with a real object of the right model."""
    model = model_of(name, pattern)
    some = model.objects.order_by("pk").first() if model is not None else None
    values = {"pk": some.pk if some else 1, "object_id": some.pk if some else 1, "id": some.pk if some else 1,
              "format": "json", "app_label": "jobs", "url": "no-such-page/", "content_type_id": 1, "number": 1}

    def value(match):
        if (match.groupdict().get("converter") or "") == "drf_format_suffix:":
            return ".json"  # DRF's suffix converter takes the dot with it
        return str(values.get(match.group("name"), "x"))

    path = re.sub(r"\(\?P<(?P<name>\w+)>[^)]*\)", value, route)  # a regex pattern's groups
    path = re.sub(r"<(?P<converter>\w+:)?(?P<name>\w+)>", value, path)  # a route's converters
    path = path.replace("^", "").replace("$", "").replace("\\.", ".").replace("/?", "/")
    return "/" + path


@pytest.fixture
def everything(people, owned_job, owned_run):
    workflow = Workflow.objects.create(name="wf", owner=people.owner)
    WorkflowRun.objects.create(workflow=workflow, scheduled_for=owned_run.scheduled_for)
    channel = Channel.objects.create(name="ops", kind="webhook", config={"url": "https://example.invalid/"})
    Rule.objects.create(channel=channel, events=["failed"])
    AuditEntry.objects.create(job=owned_job, job_name=owned_job.name, action="create", actor_name="owner",
                              source="api")
    return owned_job


def routes():
    return list(walk(get_resolver().url_patterns))


def test_the_walk_covers_the_whole_url_configuration():
    found = routes()
    names = {name for _, name, _ in found}
    assert len(found) > 150
    assert {"api:job-detail", "pages:run-tail", "workflows-api:workflow-run-rerun", "metrics",
            "admin:jobs_job_change", "admin:audit_auditentry_changelist"} <= names


@pytest.mark.parametrize("headers", [{}, {"HTTP_AUTHORIZATION": "Token not-a-real-token"},
                                     {"HTTP_AUTHORIZATION": "Bearer "}], ids=["none", "bogus-token", "empty-bearer"])
def test_no_url_answers_without_credentials(client, everything, headers):
    before = (Job.objects.get(pk=everything.pk).enabled, JobRun.objects.count(), work_entries().count())
    answered = []
    for route, name, pattern in routes():
        if name in PUBLIC or route.startswith("ping/"):  # a check-in's pings: the uuid is the secret (test_checkins)
            continue
        path = concrete(route, name, pattern)
        for method in ("get", "post"):
            response = getattr(client, method)(path, **headers)
            location = response.get("Location", "")
            refused = (response.status_code in (401, 403, 405, 429)  # 429: locked out after bogus tokens
                       or response.status_code in (301, 302) and location.startswith(LOGIN_PAGES))
            if not refused:
                answered.append(f"{method.upper()} {path} ({name}): {response.status_code} {location}")
    assert answered == [], "\n".join(answered)
    assert (Job.objects.get(pk=everything.pk).enabled, JobRun.objects.count(), work_entries().count()) == before
    assert User.objects.count() == 5 and Group.objects.count() == 3


def test_the_login_page_and_static_files_answer(client):
    assert client.get("/accounts/login/").status_code == 200
