"""docs/grafana/scheduler.json: every metric its PromQL names is one that /metrics exports."""

import json
import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from prometheus_client.parser import text_string_to_metric_families

from jobs.coordination import leases
from jobs.models import RunStatus
from notifications.models import Channel, Delivery

from .test_metrics import add_run, make_job, open_metrics  # noqa: F401 - the fixture

DASHBOARD = Path(__file__).resolve().parent.parent / "docs" / "grafana" / "scheduler.json"
# What the dashboard must show (the list), as the metric each is read from.
REQUIRED = {
    "dispatch lag": "jobs_dispatch_lag_seconds_bucket", "queue depth": "jobs_queue_depth",
    "runs by outcome": "jobs_runs_finished_total", "durations": "jobs_run_duration_seconds_bucket",
    "lost attempts": "jobs_lost_attempts_total", "leader changes": "jobs_scheduler_leader_changes_total",
    "notification failures": "jobs_notification_deliveries",
}
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless",
    "inf", "nan",
}


def expressions(dashboard):
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]


def metric_names(expr):
    """The metric names a PromQL expression reads: its identifiers, less label matchers, strings,
    grouping clauses, ranges, functions and keywords."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    names = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr):
        word, rest = match.group(), expr[match.end():].lstrip()
        if rest.startswith("(") or word.lower() in PROMQL_WORDS:
            continue
        if re.fullmatch(r"\d+[smhdwy]", word) or word.isdigit():
            continue
        names.add(word)
    return names


def test_it_reads_metric_names_out_of_promql():
    assert metric_names('histogram_quantile(0.95, sum by (job, le) (rate(a_bucket{x="y"}[5m])))') == {"a_bucket"}
    assert metric_names("time() - b_seconds") == {"b_seconds"}
    assert metric_names('sum(c) / clamp_min(sum(d{s=~"x|y"}), 1)') == {"c", "d"}


def test_the_dashboard_is_grafana_json_with_a_query_for_each_thing_it_must_show():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["panels"] and dashboard["title"]
    named = set().union(*(metric_names(expr) for _, expr in expressions(dashboard)))
    missing = {what: metric for what, metric in REQUIRED.items() if metric not in named}
    assert not missing, f"the dashboard shows nothing of: {missing}"


@pytest.mark.postgres("metrics SQL")
def test_every_metric_the_dashboard_names_is_exported(db, client, redis_client, open_metrics):  # noqa: F811
    job = make_job("dash", sla_seconds=1)
    add_run(job, RunStatus.SUCCEEDED, 100, lag=1, duration=2)
    add_run(job, RunStatus.FAILED, 50, duration=3, attempts=("lost", "failed"))
    channel = Channel.objects.create(name="ops", kind="webhook", config={"url": "http://127.0.0.1:9/"})
    for i, status in enumerate(["failed", "given_up", "pending"]):
        Delivery.objects.create(event="failed", channel=channel, status=status, dedup_key=f"k{i}")
    held = leases.take(django_settings.JOBS_LEADER_KEY, "node-a", ttl=60)
    leases.note_tick(held)
    redis_client.rpush(django_settings.JOBS_DEFAULT_QUEUE, "m1")

    response = client.get("/metrics")
    assert response.status_code == 200
    exported = {sample.name for family in text_string_to_metric_families(response.content.decode())
                for sample in family.samples}

    dashboard = json.loads(DASHBOARD.read_text())
    unknown = {(title, name) for title, expr in expressions(dashboard) for name in metric_names(expr)
               if name not in exported}
    assert not unknown, f"the dashboard names metrics /metrics does not export: {sorted(unknown)}"
    assert exported >= set(REQUIRED.values())
