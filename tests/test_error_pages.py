"""Error pages a person can read, with a way back; a favicon; the API's docs ask a logged-out person
to log in instead of answering a bare 401."""

import pytest
from django.contrib.staticfiles import finders
from django.core.exceptions import PermissionDenied
from django.test import Client, RequestFactory
from django.views import defaults

from jobs.definitions.jobs import save_job
from jobs.models import Job

from .api_personas import make_personas

pytestmark = pytest.mark.django_db

WAY_BACK = '<a href="/">Back to the overview</a>'
STYLED = "/static/pages/pages.css"


def test_an_unknown_run_is_a_styled_404_with_a_way_back(admin_client):
    response = admin_client.get("/runs/987654/")
    assert response.status_code == 404
    assert "404 · Not found" in response.text and WAY_BACK in response.text and STYLED in response.text


def test_a_refused_action_is_a_styled_403_that_says_why():
    people = make_personas()
    job = save_job(Job(name="shell", kind="command", target="true", owner=people.teammate), {"type": "manual"})
    client = Client()
    client.force_login(people.teammate)  # sees their command job, may not run commands
    response = client.post(f"/jobs/{job.pk}/run/")
    assert response.status_code == 403
    assert "403 · Not allowed" in response.text and WAY_BACK in response.text and "command" in response.text


def test_a_server_error_and_a_bad_request_are_styled_pages_with_a_way_back():
    request = RequestFactory().get("/")
    for response, heading in ((defaults.server_error(request), "500 · Server error"),
                              (defaults.bad_request(request, Exception()), "400 · Bad request"),
                              (defaults.permission_denied(request, PermissionDenied()), "403 · Not allowed")):
        text = response.content.decode()
        assert heading in text and WAY_BACK in text and STYLED in text


def test_it_serves_a_favicon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/pages/favicon.svg"
    assert finders.find("pages/favicon.svg")  # collected with the other static files (WhiteNoise serves them)


def test_the_api_docs_send_a_logged_out_person_to_the_login_page(client):
    response = client.get("/api/docs/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/api/docs/"
