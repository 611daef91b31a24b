"""The benchmark's database: made if missing, migrated, emptied, and read (sizes, settings).
``ensure_database`` and ``database_url`` need no Django (bench/compare.py); the rest run in a
script that called ``benchenv.setup()``."""

import os
from urllib.parse import urlsplit, urlunsplit

# The apps whose tables hold the service's definitions and history; django-celery-beat's schedule
# rows stay (shared between jobs).
APPS_EMPTIED = ["jobs", "audit", "notifications", "workflows", "django_celery_results"]


def database_url(name):
    """DATABASE_URL's server, the database ``name``."""
    parts = urlsplit(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"))
    return urlunsplit(parts._replace(path=f"/{name}"))


def ensure_database(name):
    import psycopg

    with psycopg.connect(database_url("postgres"), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def migrate():
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def execute(sql, params=None):
    """One statement on Django's connection; the rows it touched."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def empty(*tables):
    """TRUNCATE ``tables`` (names or models), by default every table of the service's definitions
    and history (deleting a million jobs through the ORM takes long)."""
    from django.apps import apps
    from django.db import connection

    if tables:
        names = [t if isinstance(t, str) else t._meta.db_table for t in tables]
    else:
        labels = {c.label for c in apps.get_app_configs()}
        names = [model._meta.db_table for label in APPS_EMPTIED if label in labels
                 for model in apps.get_app_config(label).get_models() if model._meta.managed]
        existing = set(connection.introspection.table_names())
        names = [t for t in names if t in existing]
    if connection.vendor == "sqlite":  # no TRUNCATE; its foreign keys are checked at the commit
        from django.db import transaction

        with transaction.atomic():
            for name in names:
                execute(f'DELETE FROM "{name}"')
        return
    execute(f"TRUNCATE {', '.join(names)} CASCADE")


def analyze(table=""):
    """What autovacuum does within a minute of a bulk load."""
    execute(f"ANALYZE {table}")


def explain(queryset):
    """EXPLAIN (ANALYZE, BUFFERS) of a queryset: the plan as PostgreSQL gives it in JSON (a dict with
    "Plan" and "Execution Time")."""
    import json

    from django.db import connection

    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]
    return (plan if isinstance(plan, list) else json.loads(plan))[0]


def setting(name):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"SHOW {name}")
        return cursor.fetchone()[0]


def table_sizes(tables=("jobs_jobrun", "jobs_jobattempt")):
    """{table: bytes with its indexes and TOAST, "database": pg_database_size}."""
    from django.db import connection

    with connection.cursor() as cursor:
        sizes = {}
        for table in tables:
            cursor.execute("SELECT pg_total_relation_size(%s)", [table])
            sizes[table] = cursor.fetchone()[0]
        cursor.execute("SELECT pg_database_size(current_database())")
        sizes["database"] = cursor.fetchone()[0]
    return sizes
