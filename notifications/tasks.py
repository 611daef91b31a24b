"""The Celery task that sends one notification delivery, on the default queue."""

from celery import shared_task

from . import sending
from .queueing import TASK_NAME


@shared_task(name=TASK_NAME, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def send_delivery(delivery_id):
    return sending.send_delivery(delivery_id)
