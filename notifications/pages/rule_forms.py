"""The notification rules' pages: the rules a user sees (their own, their team's, those of the jobs
they see; staff all) and the rule form: which events of which jobs (all, a tag's, one job) go to
which channel, made, changed and deleted through the API's ``RuleSerializer`` and
``notifications.actions`` (``jobs.pages.resource_forms``). A user who is not staff writes rules for
one of their jobs, on a channel of theirs, their team's or a shared one: the serializer and the
actions say so."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.http import require_POST

from jobs.actions.permissions import sees_everything, visible_jobs
from jobs.pages.common import page, refused_is_forbidden
from jobs.pages.form_kit import NONE, FormField
from jobs.pages.job_forms import group_choices
from jobs.pages.resource_forms import OTHER, ResourceForm, deleted, form_view

from .. import actions
from ..models import RULE_EVENTS, Rule, RuleScope
from ..resources import RULES

SHOWN = 500
JOB_CHOICES = 1000  # a select of jobs: more than this, and the rest are reached from the job's page (?job=<id>)


def from_rule(rule):
    return {"channel": str(rule.channel_id or ""), "events": list(rule.events), "scope": rule.scope, "tag": rule.tag,
            "job": str(rule.job_id or ""), "enabled": rule.enabled, "group": rule.group.name if rule.group_id else ""}


def from_post(post):
    values = {name: post.get(name, "") for name in ("channel", "scope", "tag", "job", "group")}
    values.update(events=post.getlist("events"), enabled="enabled" in post)
    return values


def to_api(values, rule=None):
    return {"channel": values["channel"] or None, "events": values["events"], "scope": values["scope"],
            "tag": values["tag"], "job": values["job"] or None, "enabled": values["enabled"],
            "group": values["group"] or None}, {}


def job_choices(user, current):
    jobs = visible_jobs(user).order_by("name")
    found = [(str(pk), name) for pk, name in jobs.values_list("pk", "name")[:JOB_CHOICES]]
    if current.isdigit() and current not in {pk for pk, _ in found}:
        found += [(str(pk), name) for pk, name in jobs.filter(pk=current).values_list("pk", "name")]
    return [("", NONE), *found]


def form_fields(request, values, errors):
    user = request.user
    channels = actions.visible_channels(user).order_by("name").values_list("pk", "name")
    scopes = RuleScope.choices if sees_everything(user) else [(RuleScope.JOB, RuleScope.JOB.label)]

    def made(name, label, widget, help_text="", **more):
        return FormField(name, label, widget, values[name], help_text, errors.get(name, []), **more)

    return {
        "channel": made("channel", "Channel", "select", "Yours, your team's, or a shared one.",
                        choices=[("", NONE), *((str(pk), name) for pk, name in channels)]),
        "events": made("events", "Events", "checkboxes", choices=RULE_EVENTS),
        "scope": made("scope", "Of", "select", choices=scopes),
        "tag": made("tag", "Tag", "text", "The jobs with this tag."),
        "job": made("job", "Job", "select", choices=job_choices(user, values["job"])),
        "enabled": made("enabled", "Enabled", "checkbox"),
        "group": made("group", "Group", "select", "A group of yours whose members may also see and change the rule.",
                      choices=[("", NONE), *group_choices(user, values["group"])]),
    }


def answer(request, values, errors, rule=None):
    fields = form_fields(request, values, errors)
    other = [text for name, texts in errors.items() if name not in fields or name == OTHER for text in texts]
    response = page(request, "pages/rule_form.html", {"rule": rule, "f": fields, "other_errors": other}, "rules")
    response.status_code = 400 if errors else 200
    return response


@login_required
def rule_list(request):
    rules = actions.visible_rules(request.user).select_related("channel", "job", "owner", "group").order_by("pk")
    return page(request, "pages/rules.html", {"rules": rules[:SHOWN], "count": rules.count(), "shown": SHOWN},
                "rules")


FORM = ResourceForm(RULES, from_post, to_api, answer, actions.rule_name, from_rule)


@login_required
@refused_is_forbidden
def rule_new(request):
    job = request.GET.get("job", "")  # the job's page asks for a rule of that job
    values = from_rule(Rule(scope=RuleScope.JOB if job or not sees_everything(request.user) else RuleScope.ALL))
    values["job"] = job if job.isdigit() else ""
    return form_view(request, FORM, done=reverse("notification-pages:rules"), initial=values)


def visible_rule(request, pk):
    return get_object_or_404(actions.visible_rules(request.user).select_related("channel", "job", "group"), pk=pk)


@login_required
@refused_is_forbidden
def rule_edit(request, pk):
    return form_view(request, FORM, visible_rule(request, pk), reverse("notification-pages:rules"))


@login_required
@require_POST
@refused_is_forbidden
def rule_delete(request, pk):
    rule = visible_rule(request, pk)
    return deleted(request, RULES, rule, actions.rule_name(rule), reverse("notification-pages:rules"),
                   reverse("notification-pages:rule-edit", args=[pk]))
