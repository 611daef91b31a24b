"""The browsable API in a browser's shoes: no HTML form that cannot work; staff get a raw JSON form
prefilled with what the admin would make, and it is accepted as it stands; others are sent to the pages."""

import html
import json
import re

import pytest
from django.test import Client

from jobs.models import Job

from .api_personas import make_personas

pytestmark = pytest.mark.django_db


def raw_form(response):
    found = re.search(r'<textarea[^>]*name="_content"[^>]*>(.*?)</textarea>', response.text, re.S)
    return found and html.unescape(found.group(1)).strip()


def test_staff_get_a_raw_form_prefilled_with_the_admins_defaults_that_saves_as_it_stands(admin_client):
    page = admin_client.get("/api/jobs/", HTTP_ACCEPT="text/html")
    assert page.status_code == 200
    assert 'name="_content_type"' in page.text and "HTML form" not in page.text
    prefill = json.loads(raw_form(page))
    assert None not in (prefill["args"], prefill["kwargs"], prefill["environment"], prefill["tags"])
    assert prefill["schedule"] == {"type": "manual"}
    assert (prefill["enabled"], prefill["catchup_policy"], prefill["timeout_seconds"]) == (True, "latest", 3600)

    prefill.update(name="from-the-browsable-api", kind="callable", target="builtin.noop")
    created = admin_client.post("/api/jobs/", json.dumps(prefill), content_type="application/json")
    assert created.status_code == 201, created.json()
    job = Job.objects.get(name="from-the-browsable-api")
    assert job.enabled and job.catchup_policy == "latest"


def test_a_non_staff_user_gets_no_forms_and_a_link_to_the_pages():
    people = make_personas()
    client = Client()
    client.force_login(people.teammate)
    page = client.get("/api/jobs/", HTTP_ACCEPT="text/html")
    assert page.status_code == 200
    assert 'name="_content"' not in page.text and "HTML form" not in page.text
    assert 'To create or change jobs in a browser, use the <a href="/jobs/">pages</a>' in page.text


def test_the_api_root_in_a_browser_links_every_apps_endpoints(admin_client):
    page = admin_client.get("/api/", HTTP_ACCEPT="text/html").text
    for path in ("/api/jobs/", "/api/runs/", "/api/workflows/", "/api/workflow-runs/", "/api/channels/", "/api/rules/"):
        assert f'http://testserver{path}' in page, path
