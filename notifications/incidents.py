"""A job's open incident (``models.Incident``): opened by a failure of a job with none open, closed
by its next success, both in the transaction that ended the run (``outbox``); and the signed link
an alert carries to acknowledge it (``acknowledge_url``), which a person opens logged in
(``notifications.pages``)."""

from django.conf import settings
from django.core import signing
from django.urls import reverse

from .models import Incident

SALT = "notifications.incident.acknowledge"


def open_for(run, now):
    """The job's open incident, opened by ``run``'s failure when none was."""
    # ON CONFLICT DO NOTHING against the one open incident per job: two failures at once open one.
    Incident.objects.bulk_create([Incident(job_id=run.job_id, run=run, opened_at=now)], ignore_conflicts=True)
    return Incident.objects.filter(job_id=run.job_id, closed_at__isnull=True).first()


def close_for(run, now):
    """Close the job's open incident (a success ended it); whether there was one."""
    return bool(Incident.objects.filter(job_id=run.job_id, closed_at__isnull=True).update(closed_at=now))


def open_incident_sql():
    """SQL over the job ``j``: whether it has an open incident (so its success must be told to the
    outbox, which closes it), for the lifecycle's one-statement success (jobs.lifecycle.events)."""
    return "EXISTS (SELECT 1 FROM notifications_incident i WHERE i.job_id = j.id AND i.closed_at IS NULL)"


def token(incident):
    return signing.Signer(salt=SALT).sign(str(incident.pk))


def incident_id(text):
    """The incident a link's token names, or None when the token was not signed here."""
    try:
        return int(signing.Signer(salt=SALT).unsign(text))
    except (signing.BadSignature, ValueError):
        return None


def acknowledge_url(incident):
    """The link in an alert that acknowledges ``incident``: signed, so it names one incident and
    cannot be made up for another; opening it still needs a login and the right to act on the job."""
    return f"{settings.SITE_URL}{reverse('notification-pages:acknowledge', args=[token(incident)])}"
