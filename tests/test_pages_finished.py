"""The pages finished (issue 50's "one look" and "the whole job"): what a user sees, page by page,
against what the test made. Each test names the point of the issue it holds."""

import html
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from jobs.actions import jobs as actions
from jobs.lifecycle import fold_ends
from jobs.models import Job, JobAttempt, JobRun, Limit, RunEnd, RunStatus

from .test_calendars import make_calendar
from .test_pages import client_for, make_job, make_run

pytestmark = pytest.mark.django_db


# --- one look: menus, redirects, links


def test_the_login_page_shows_no_menu_to_someone_logged_out():
    text = Client().get("/accounts/login/").text
    for link in ('href="/jobs/"', 'href="/runs/"', 'href="/reports/"', 'href="/limits/"', 'href="/calendars/"',
                 "API tokens", "Log out"):
        assert link not in text, link
    assert 'name="username"' in text


def test_reports_are_in_the_menu_and_reports_is_an_index_of_tags_groups_and_jobs(people):
    Job.objects.filter(pk=people.job.pk).update(tags=["finance"], group=people.team)
    manual = make_job("by-hand", schedule={"type": "manual"}, owner=people.owner)
    page = client_for(people.owner).get("/reports/")
    assert page.status_code == 200
    text = page.text
    assert 'href="/reports/"' in text and ">Reports<" in text
    assert 'href="/reports/?tag=finance&amp;days=30"' in text
    assert f'href="/reports/?group={people.team.name}&amp;days=30"' in text
    assert f'href="/jobs/{people.job.pk}/report/?days=30"' in text
    assert f'href="/jobs/{manual.pk}/report/' not in text  # a manual-only job has no slots
    # Another user's tags and jobs are not listed.
    outsider = client_for(people.outsider).get("/reports/").text
    assert "finance" not in outsider and people.job.name not in outsider


def test_the_flower_links_follow_flower_port_when_flower_url_is_not_set():
    env = {**os.environ, "FLOWER_PORT": "5601"}
    env.pop("FLOWER_URL", None)
    said = subprocess.run([sys.executable, "-c", "import django; django.setup(); from django.conf import settings; "
                           "print(settings.FLOWER_URL)"], env=env, capture_output=True, text=True, timeout=60)
    assert said.stdout.strip() == "http://127.0.0.1:5601", said.stderr
    env["FLOWER_URL"] = "https://flower.example.org"
    said = subprocess.run([sys.executable, "-c", "import django; django.setup(); from django.conf import settings; "
                           "print(settings.FLOWER_URL)"], env=env, capture_output=True, text=True, timeout=60)
    assert said.stdout.strip() == "https://flower.example.org", said.stderr


def test_the_flower_links_of_the_nav_and_the_run_page_use_the_flower_url(people, settings):
    settings.FLOWER_URL = "http://127.0.0.1:5601"
    run = make_run(people.job)
    JobAttempt.objects.create(run=run, number=1, task_id="task-1", worker="w@host", outcome="succeeded")
    text = client_for(people.staff).get(f"/runs/{run.pk}/").text
    assert 'href="http://127.0.0.1:5601" target="_blank" rel="noopener" id="flower-link"' in text
    assert 'href="http://127.0.0.1:5601/task/task-1"' in text


# --- wording


def test_plurals_and_times_read_as_words(people, redis_client):
    now = timezone.now()
    job = make_job("soon", owner=people.owner, schedule={"type": "interval", "every_seconds": 60})
    Job.objects.filter(pk=job.pk).update(next_run_at=now + timedelta(seconds=20))
    run = JobRun.objects.create(job=job, status=RunStatus.SUCCEEDED, scheduled_for=now - timedelta(seconds=5),
                                queued_at=now - timedelta(seconds=5), started_at=now - timedelta(seconds=5),
                                finished_at=now - timedelta(seconds=4), created_at=now - timedelta(seconds=5))
    JobAttempt.objects.create(run=run, number=1, task_id="t1", worker="", outcome="succeeded",
                              started_at=now - timedelta(seconds=5), finished_at=now - timedelta(seconds=4))
    RunEnd.record(run, RunStatus.SUCCEEDED, run.finished_at)
    fold_ends()
    Job.objects.filter(pk=job.pk).update(last_run=run)

    listing = client_for(people.owner).get("/jobs/?q=soon").text
    assert "just now" in listing and "0 minutes" not in listing
    overview = client_for(people.staff).get("/").text
    assert "in under a minute" in overview and "in 0 minutes" not in overview
    assert "(1 run)" in overview and "(1 runs)" not in overview
    # No worker has run an attempt: the page says what the list is, not "None."
    assert "None has run an attempt in the last 10 minutes" in overview
    assert "Workers seen in the last 10 minutes" not in overview


def test_the_audit_trail_shows_json_not_python(people):
    actor = actions.Actor(people.owner, "page", "127.0.0.1", people.owner.get_username())
    job = Job.objects.get(pk=people.job.pk)
    actions.edit(actor, job, {"parameters": [{"name": "day", "type": "date", "required": False}]})
    text = html.unescape(client_for(people.owner).get(f"/jobs/{job.pk}/").text)
    assert '"required": false' in text
    assert "'required': False" not in text and "{'" not in text


def test_one_time_zone_rule_is_stated_on_every_page(people):
    berlin = make_job("berlin", owner=people.owner, schedule={"type": "cron", "cron": "0 5 * * *",
                                                               "timezone": "Europe/Berlin"})
    client = client_for(people.owner)
    assert ("Times on this job's pages are in Europe/Berlin, its schedule's zone"
            in client.get(f"/jobs/{berlin.pk}/").text)
    assert "Times on this job's pages are in Europe/Berlin" in client.get(f"/jobs/{berlin.pk}/slots/").text
    for url in ("/", "/runs/", "/jobs/", "/reports/"):
        assert "Times are in UTC; a job's own pages show its schedule's zone." in client.get(url).text, url


# --- one form kit


def test_the_limit_form_is_drawn_with_the_job_forms_kit_and_one_create_button(people):
    client = client_for(people.owner)
    for url in ("/limits/", "/limits/new/"):
        text = client.get(url).text
        assert '<label for="id_key">Key</label>' in text, url
        assert "Key:" not in text and "Max running:" not in text, url
        assert '<p class="help">' in text, url
        assert '<button class="primary" id="save-limit">Create the limit</button>' in text, url
    made = client.post("/limits/new/", {"key": "warehouse", "max_running": "2", "description": ""})
    assert made.status_code == 302 and Limit.objects.filter(key="warehouse").exists()
    edit = client.get("/limits/warehouse/edit/").text
    assert '<button class="primary" id="save-limit">Save</button>' in edit
    refused = client.post("/limits/new/", {"key": "bad key!", "max_running": "x"}).text
    assert 'class="field invalid" id="field-key"' in refused and 'class="field-error"' in refused


def test_the_calendar_forms_use_the_kit_and_the_page_lists_every_date(people):
    staff = client_for(people.staff)
    listing = staff.get("/calendars/").text
    assert '<button class="primary" id="save-calendar">Create the calendar</button>' in listing
    assert '<label for="id_dates">Typed-in dates</label>' in listing
    assert 'textarea name="dates" id="id_dates" rows="10"' in listing
    made = staff.post("/calendars/", {"name": "office", "description": "", "country": "DE", "subdivision": "",
                                      "dates": "2026-12-28 Closed for the move"})
    assert made.status_code == 302 and made["Location"] == "/calendars/office/"

    page = staff.get("/calendars/office/").text
    header, rest = page.split("</header>", 1)
    assert 'id="delete-calendar"' in header  # with the page's actions, not inside the import form
    import_form = rest.split('id="calendar-import"', 1)[1].split("</form>", 1)[0]
    assert "delete" not in import_form.lower()
    assert ('<label class="check"><input type="checkbox" name="replace" id="id_replace"> Replace the typed-in dates'
            in import_form)
    dates = page.split('id="calendar-dates"', 1)[1]
    assert "2026-12-28" in dates and "Closed for the move" in dates  # the typed-in date
    assert "2026-12-25" in dates  # and the country's holidays


# --- the whole job


def test_the_job_page_shows_calendars_business_days_and_a_functions_arguments(people):
    make_calendar("office")
    job = make_job("monthly", owner=people.owner, calendars=["office"], business_days=True, business_day_of_month=-2,
                   args=[1, "two"], kwargs={"region": "eu", "dry_run": True},
                   schedule={"type": "cron", "cron": "0 6 * * *", "timezone": "UTC"})
    text = html.unescape(client_for(people.owner).get(f"/jobs/{job.pk}/").text)
    days = text.split('id="job-days"', 1)[1].split("</dl>", 1)[0]
    assert '<a href="/calendars/office/">office</a>' in days
    assert "Monday to Friday only" in days and "only the 2nd from the end business day of each month" in days
    call = text.split('id="job-call"', 1)[1].split("</section>", 1)[0]
    assert '[1, "two"]' in call and '"dry_run": true' in call and '"region": "eu"' in call


def test_a_manual_only_job_offers_no_pause_and_a_scheduled_one_does(people):
    manual = make_job("by-hand", owner=people.owner, schedule={"type": "manual"})
    client = client_for(people.owner)
    text = client.get(f"/jobs/{manual.pk}/").text
    assert 'id="pause"' not in text and 'id="resume"' not in text and "Backfill" not in text
    assert 'id="run-now"' in text
    assert 'id="pause"' in client.get(f"/jobs/{people.job.pk}/").text


def test_the_job_form_links_the_limits_page_and_the_forecast_and_spells_dst(people):
    text = client_for(people.owner).get("/jobs/new/").text
    limit_help = text.split('id="field-limit_key"', 1)[1].split("</div>", 1)[0]
    assert '<a href="/limits/">Limits page</a>' in limit_help and "/api/limits/" not in limit_help
    spread_help = text.split('id="field-spread"', 1)[1].split("</div>", 1)[0]
    assert '<a href="/forecast/">load forecast</a>' in spread_help and "docs/guide" not in spread_help
    assert ">DST: skipped hour<" in text and ">DST: repeated hour<" in text and "Dst:" not in text


def test_a_flat_load_has_no_peak_minutes(people):
    # The outsider's forecast: staff's would hold the personas' nightly job too (02:00 UTC), a peak
    # whenever the two hours reach it.
    for n in range(3):  # every minute, each at its own second: one run a minute, all day
        make_job(f"flat-{n}", owner=people.outsider, schedule={"type": "cron", "cron": f"{n}-59/3 * * * *",
                                                                "timezone": "UTC"})
    text = client_for(people.outsider).get("/forecast/?hours=2").text
    assert 'id="no-peaks"' in text and "No peak: no minute has more runs than the average" in text
    peaked = make_job("peak", owner=people.outsider, schedule={"type": "cron", "cron": "0 * * * *", "timezone": "UTC"})
    text = client_for(people.outsider).get("/forecast/?hours=2").text
    assert 'id="no-peaks"' not in text and f'href="/jobs/{peaked.pk}/"' in text


def test_the_forecast_chart_has_a_scale_an_average_line_and_the_hours(people):
    for n in range(3):  # each every third minute, one after the other: one run a minute, flat
        make_job(f"flat-{n}", owner=people.outsider, schedule={"type": "cron", "cron": f"{n}-59/3 * * * *",
                                                                "timezone": "UTC"})
    asked = timezone.now().replace(second=0, microsecond=0)
    text = client_for(people.outsider).get("/forecast/?hours=2").text
    chart = text.split('<svg class="forecast-chart"', 1)[1].split("</svg>", 1)[0]
    # One run a minute; the scale has room above it (1.25 times, rounded up), from 0.
    assert ">2/min</text>" in chart and ">0</text>" in chart
    assert 'class="average"' in chart and "average: 1.00 runs a minute" in chart
    start = asked if f">{asked:%H:%M}</text>" in chart else asked + timedelta(minutes=1)  # the minute may turn
    assert f">{start:%H:%M}</text>" in chart and f">{start + timedelta(hours=1):%H:%M}</text>" in chart
    assert chart.count('class="load"') and 'class="peak"' not in chart
