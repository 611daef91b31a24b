"""API tokens move from rest_framework.authtoken (keys kept in clear) to django-rest-knox (a SHA-512
of each key): every existing key is hashed into knox's table, expiring API_TOKEN_TTL_DAYS from now,
so the jobsctl configurations that hold one keep working; the clear keys are then deleted."""

import hashlib
from datetime import timedelta

from django.conf import settings
from django.db import migrations
from django.utils import timezone

KEY_PREFIX_LENGTH = 15  # knox.settings.CONSTANTS.TOKEN_KEY_LENGTH


def hash_clear_keys(apps, schema_editor):
    connection = schema_editor.connection
    if "authtoken_token" not in connection.introspection.table_names():
        return
    AuthToken = apps.get_model("knox", "AuthToken")
    days = getattr(settings, "API_TOKEN_TTL_DAYS", 90)
    expiry = timezone.now() + timedelta(days=days) if days else None
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, user_id FROM authtoken_token")
        rows = cursor.fetchall()
        # knox's digest: SHA-512 of the key's UTF-8 bytes (knox.crypto.hash_token).
        AuthToken.objects.bulk_create([
            AuthToken(digest=hashlib.sha512(key.encode()).hexdigest(), token_key=key[:KEY_PREFIX_LENGTH],
                      user_id=user_id, expiry=expiry)
            for key, user_id in rows], ignore_conflicts=True)
        cursor.execute("DELETE FROM authtoken_token")


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0017_run_key_slot"),
        ("knox", "0009_extend_authtoken_field"),
    ]

    operations = [migrations.RunPython(hash_clear_keys, migrations.RunPython.noop)]
