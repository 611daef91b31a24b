"""What the notifications app shows on other apps' pages: ``{% load notifications %}``."""

from django import template

from ..models import Delivery

register = template.Library()


@register.inclusion_tag("notifications/_run_notifications.html")
def run_notifications(run):
    """The deliveries a run produced, on the run page."""
    return {"deliveries": Delivery.objects.filter(run=run).select_related("channel").order_by("created_at")}
