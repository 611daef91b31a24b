"""What the notifications app shows on other apps' pages: ``{% load notifications %}``."""

from django import template

from ..models import Delivery, Incident

register = template.Library()


@register.inclusion_tag("notifications/_run_notifications.html")
def run_notifications(run):
    """The deliveries a run produced, on the run page."""
    return {"deliveries": Delivery.objects.filter(run=run).select_related("channel").order_by("created_at")}


@register.inclusion_tag("notifications/_job_incident.html")
def job_incident(job, may_act):
    """The job's open incident, with the button that acknowledges it, on the job page."""
    return {"job": job, "may_act": may_act,
            "incident": Incident.objects.filter(job=job, closed_at__isnull=True).first()}
