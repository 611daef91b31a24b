"""How far the queue of check-in pings has been recorded (jobs.lifecycle.ping_queue)."""

from django.db import models


class PingQueueMark(models.Model):
    """The number of the last queued ping the scheduler leader recorded, written in the transaction
    that recorded it, so that a leader that dies before it trims the queue records none twice.
    ``epoch`` names the queue's numbering: a Redis that lost the queue numbers its pings from 1 again
    under a new epoch."""

    name = models.CharField(max_length=50, primary_key=True)
    epoch = models.CharField(max_length=64, blank=True)
    recorded = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = "ping queue mark"

    def __str__(self):
        return f"{self.name}: {self.recorded} recorded (epoch {self.epoch or '-'})"
