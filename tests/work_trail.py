"""The trail's entries about work (jobs, workflows, channels, rules, limits, calendars, secrets),
without those about people (logins, users, groups and their permissions, tokens) that making and
logging in the tests' users writes too."""

from audit.models import AuditEntry, Subject

PEOPLE = (Subject.USER, Subject.GROUP, Subject.TOKEN, Subject.TRAIL)


def work_entries():
    return AuditEntry.objects.exclude(subject__in=PEOPLE)
