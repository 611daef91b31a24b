"""The time every host agrees on: the database's.

Workers, schedulers and web servers run on many hosts whose clocks drift. A time one host writes
and another compares (a claim, a heartbeat, a queued run's age, a lease) comes from the database:
``Now()`` inside a statement, or ``now()`` when Python needs the value.
"""

from django.db import connection
from django.utils import timezone


def now():
    """The database's clock (SQLite, a single machine's trial database, has none: the local one)."""
    if connection.vendor != "postgresql":
        return timezone.now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        return cursor.fetchone()[0]
