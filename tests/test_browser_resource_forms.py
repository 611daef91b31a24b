"""The channel, rule and workflow forms in a real browser: only the chosen kind's, scope's and
schedule's fields shown, rows added, and each form saved from the browser. Screenshots in the test's
temporary folder, as in test_browser."""

import pytest
from django.contrib.auth.models import User

from jobs.models import Job
from notifications.models import Channel, Rule
from workflows.models import Workflow

from .test_browser import browser_page, shot  # noqa: F401  (the fixtures, which need Chromium)
from .test_notifications_support import grant_channel_permissions
from .workflow_helpers import make_job

pytestmark = pytest.mark.django_db(transaction=True)


def log_in(page, url, name):
    page.goto(f"{url}/rules/")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", f"{name}-pass-1")
    page.click("button.primary")
    page.wait_for_url("**/rules/")


def test_staff_make_a_channel_a_rule_and_a_workflow_in_the_browser(live_server, browser_page, shot):  # noqa: F811
    grant_channel_permissions(User.objects.create_user("ada", password="ada-pass-1", is_staff=True))
    for name in ("extract", "load"):
        make_job(name)
    page = browser_page
    log_in(page, live_server.url, "ada")

    page.goto(f"{live_server.url}/channels/")
    page.click("#new-channel")
    page.wait_for_url("**/channels/new/")
    assert page.is_visible("#field-email\\.recipients") and not page.is_visible("#field-slack\\.url")
    page.select_option("select[name=kind]", "webhook")
    assert page.is_visible("#field-webhook\\.secret") and not page.is_visible("#field-email\\.recipients")
    page.select_option("select[name=kind]", "email")
    page.fill("input[name=name]", "ops-mail")
    page.fill("input[name='email.recipients-value']", "ops@example.com")
    page.click("[data-add-row='email.recipients']")
    page.locator("input[name='email.recipients-value']").nth(1).fill("oncall@example.com")
    shot(page, "channel_form")
    page.click("#save-channel")
    page.wait_for_url("**/channels/")
    assert Channel.objects.get().config == {"recipients": ["ops@example.com", "oncall@example.com"]}

    page.goto(f"{live_server.url}/rules/new/")
    assert page.is_visible("#field-tag") is False and page.is_visible("#field-job") is False  # scope: all jobs
    page.select_option("select[name=scope]", "tag")
    assert page.is_visible("#field-tag") and not page.is_visible("#field-job")
    page.fill("input[name=tag]", "nightly")
    page.check("input[name=events][value=failed]")
    page.select_option("select[name=channel]", label="ops-mail")
    page.click("#save-rule")
    page.wait_for_url("**/rules/")
    rule = Rule.objects.get()
    assert (rule.scope, rule.tag, rule.events) == ("tag", "nightly", ["failed"])

    page.goto(f"{live_server.url}/workflows/")
    page.click("#new-workflow")
    page.wait_for_url("**/workflows/new/")
    assert not page.is_visible("#field-cron")
    page.select_option("select[name=schedule_type]", "cron")
    assert page.is_visible("#field-cron") and not page.is_visible("#field-every_seconds")
    page.fill("input[name=name]", "etl")
    page.fill("textarea[name=nodes]", "extract\nload")
    page.fill("textarea[name=edges]", "extract -> load")
    page.fill("input[name=cron]", "0 4 * * *")
    page.click("#preview-workflow")
    page.wait_for_selector("#graph-preview svg")
    assert not Workflow.objects.exists()
    shot(page, "workflow_form")
    page.click("#save-workflow")
    page.wait_for_url("**/workflows/*/")
    workflow = Workflow.objects.get()
    assert [(edge.upstream, edge.downstream) for edge in workflow.graph()[1]] == [("extract", "load")]
    assert workflow.crontab.hour == "4"


def test_a_jobs_parameters_are_typed_as_rows_in_the_browser(live_server, browser_page, shot):  # noqa: F811
    User.objects.create_user("bob", password="bob-pass-1")
    page = browser_page
    log_in(page, live_server.url, "bob")
    page.goto(f"{live_server.url}/jobs/new/")
    page.fill("input[name=name]", "report")
    page.fill("input[name=target]", "builtin.echo")
    rows = page.locator("[data-rows=parameters] .row")
    rows.nth(0).locator("input[name=parameters-name]").fill("day")
    rows.nth(0).locator("select[name=parameters-type]").select_option("date")
    rows.nth(0).locator("select[name=parameters-required]").select_option("required")
    page.click("[data-add-row=parameters]")
    rows.nth(1).locator("input[name=parameters-name]").fill("mode")
    rows.nth(1).locator("select[name=parameters-type]").select_option("choice")
    rows.nth(1).locator("input[name=parameters-default]").fill("fast")
    rows.nth(1).locator("input[name=parameters-choices]").fill("fast, full")
    shot(page, "parameters")
    page.click("#save-job")
    page.wait_for_url("**/jobs/*/")

    assert Job.objects.get(name="report").parameters == [
        {"name": "day", "type": "date", "default": None, "required": True, "description": "", "choices": []},
        {"name": "mode", "type": "choice", "default": "fast", "required": False, "description": "",
         "choices": ["fast", "full"]}]
