"""Handing deliveries to a worker: one ``notifications.send_delivery`` task per delivery, named by
its string (notifications.tasks runs it), on the default queue."""

import logging

from celery import current_app
from django.conf import settings

from .models import Delivery, DeliveryStatus

logger = logging.getLogger(__name__)

TASK_NAME = "notifications.send_delivery"


def enqueue_pending(keys):
    due = Delivery.objects.filter(dedup_key__in=keys, status=DeliveryStatus.PENDING)
    for pk in due.values_list("pk", flat=True):
        enqueue(pk)


def enqueue(delivery_id, eta=None):
    try:
        current_app.send_task(TASK_NAME, args=[delivery_id], queue=settings.JOBS_DEFAULT_QUEUE, eta=eta)
    except Exception:
        # The row stays pending; sending.send_due publishes it again.
        logger.exception("could not publish delivery %s; send_due will retry", delivery_id)
