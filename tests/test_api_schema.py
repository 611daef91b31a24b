"""The OpenAPI schema builds without a request too (``manage.py spectacular``, as a client generator
or a docs build would run it), valid and without a warning."""

from django.core.management import call_command


def test_the_schema_builds_offline_without_errors_or_warnings(tmp_path, db):
    path = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(path))
    text = path.read_text()
    for call in ("/api/channels/{id}/test/:", "/api/rules/{id}/:", "/api/jobs-as-code/:", "/api/jobs/{id}/why/:",
                 "/api/audit/:"):
        assert call in text
