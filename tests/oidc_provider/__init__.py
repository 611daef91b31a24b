"""A tiny OpenID Connect provider for tests/test_oidc_login.py: django-oidc-provider in a Django
project of its own (its own settings, a SQLite database in the test's folder), served by gunicorn in a
process of its own. Its users' groups are the ``groups`` claim (scope ``groups``). No tests here."""
