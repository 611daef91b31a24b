"""The notifications' part of /metrics (registered with jobs.metrics.collector when Django starts)."""

from prometheus_client.core import GaugeMetricFamily

from .models import Delivery, DeliveryStatus


def deliveries_by_status(cursor):
    gauge = GaugeMetricFamily("jobs_notification_deliveries", "Notification deliveries by status.",
                              labels=["status"])
    cursor.execute(f"SELECT status, COUNT(*) FROM {Delivery._meta.db_table} GROUP BY status")
    counts = dict(cursor.fetchall())
    for status in DeliveryStatus.values:
        gauge.add_metric([status], counts.get(status, 0))
    yield gauge
