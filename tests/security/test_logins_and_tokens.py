"""Logins and API tokens under attack: repeated failed logins (the pages', the admin's) and refused
tokens lock the address out for a while, even with the right password or a good token; tokens are
kept hashed (a leaked database holds no usable key), expire, and are revoked from the pages and
the command line. (The old clear-text tokens were hashed by jobs.0018, of an earlier release, now in
the squash: docs/operations/deployment.md, Upgrading.)"""

from datetime import timedelta
from io import StringIO

import pytest
import time_machine
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

PASSWORD = "a-long-password-of-owners"
ATTACKER, NEIGHBOUR = "198.51.100.66", "198.51.100.77"


@pytest.fixture
def owner(people):
    people.owner.set_password(PASSWORD)
    people.owner.is_staff = people.owner.is_superuser = True  # so the admin's login takes them too
    people.owner.save()
    return people.owner


def api_status(key, address=NEIGHBOUR):
    return APIClient().get("/api/jobs/", HTTP_AUTHORIZATION=f"Token {key}", REMOTE_ADDR=address).status_code


def made_key(user, *args):
    out = StringIO()
    call_command("tokens", "create", user.username, *args, stdout=out, stderr=StringIO())
    return out.getvalue().strip()


@pytest.mark.parametrize("login_page", ["/accounts/login/", "/admin/login/"])
def test_failed_logins_lock_the_address_and_user_out_even_with_the_right_password(owner, settings, login_page):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        attempt = Client().post(login_page, {"username": "owner", "password": "guess"}, REMOTE_ADDR=ATTACKER)
        assert attempt.status_code in (200, 429) and "_auth_user_id" not in attempt.client.session

    locked = Client()
    answer = locked.post(login_page, {"username": "owner", "password": PASSWORD}, REMOTE_ADDR=ATTACKER)
    assert answer.status_code == 429 and "_auth_user_id" not in locked.session
    assert "even with the right password" in answer.content.decode()
    # The owner, from their own address, is not locked out by the attacker's guesses.
    elsewhere = Client()
    assert elsewhere.post(login_page, {"username": "owner", "password": PASSWORD}, REMOTE_ADDR=NEIGHBOUR).status_code == 302
    assert elsewhere.session["_auth_user_id"] == str(owner.pk)

    call_command("axes_reset", stdout=StringIO())
    again = Client()
    assert again.post(login_page, {"username": "owner", "password": PASSWORD}, REMOTE_ADDR=ATTACKER).status_code == 302


def test_refused_tokens_lock_the_address_out_of_token_authentication(owner, settings):
    key = made_key(owner)
    for _ in range(settings.AXES_FAILURE_LIMIT):
        assert api_status("0" * 64, ATTACKER) == 401
    locked = APIClient().get("/api/jobs/", HTTP_AUTHORIZATION=f"Token {key}", REMOTE_ADDR=ATTACKER)
    assert locked.status_code == 429 and "Too many refused tokens" in locked.json()["detail"]
    assert api_status(key, NEIGHBOUR) == 200
    call_command("axes_reset", stdout=StringIO())
    assert api_status(key, ATTACKER) == 200


def test_tokens_are_kept_hashed_and_a_copy_of_the_database_holds_no_usable_key(owner):
    key = made_key(owner)
    assert api_status(key) == 200
    with connection.cursor() as cursor:
        cursor.execute("SELECT digest, token_key FROM knox_authtoken")
        stored = cursor.fetchall()
    assert len(stored) == 1 and key not in stored[0]
    for value in stored[0]:
        assert api_status(value) == 401  # what the database holds is no token


def test_a_token_expires_after_api_token_ttl_days(owner, settings):
    settings.API_TOKEN_TTL_DAYS = 30
    key, forever = made_key(owner), made_key(owner, "--days", "0")
    with time_machine.travel(timezone.now() + timedelta(days=29), tick=False):
        assert api_status(key) == 200
    with time_machine.travel(timezone.now() + timedelta(days=31), tick=False):
        assert api_status(key) == 401
        assert api_status(forever) == 200


def test_a_user_makes_and_revokes_their_tokens_on_the_pages_and_not_anothers(owner, people):
    pages = Client()
    pages.force_login(owner)
    made = pages.post("/accounts/tokens/new/")
    assert (made.status_code, made["Location"]) == (302, "/accounts/tokens/")  # a reload makes no second token
    shown = pages.get("/accounts/tokens/").content.decode()
    key = shown.split('<code id="new-token-key">')[1].split("</code>")[0]
    assert api_status(key) == 200
    listing = pages.get("/accounts/tokens/").content.decode()
    assert key not in listing and f"<code>{key[:15]}…</code>" in listing  # the key is shown once
    assert AuthToken.objects.filter(user=owner).count() == 1

    outsider = Client()
    outsider.force_login(people.outsider)
    outsider.post(f"/accounts/tokens/{key[:15]}/revoke/")
    assert api_status(key) == 200
    pages.post(f"/accounts/tokens/{key[:15]}/revoke/")
    assert api_status(key) == 401
    assert f"<code>{key[:15]}…</code>" not in pages.get("/accounts/tokens/").content.decode()


def test_the_command_line_lists_and_revokes_tokens(owner):
    key = made_key(owner)
    out = StringIO()
    call_command("tokens", "list", "owner", stdout=out)
    assert key[:15] in out.getvalue() and key not in out.getvalue()
    call_command("tokens", "revoke", key[:15], stdout=StringIO())
    assert api_status(key) == 401


def test_the_api_lists_and_revokes_the_callers_tokens_only(owner, people):
    key, outsiders = made_key(owner), made_key(people.outsider)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    listed = client.get("/api/tokens/").json()
    assert [(t["prefix"], t["current"]) for t in listed] == [(key[:15], True)]
    assert key not in str(listed)
    assert client.delete(f"/api/tokens/{outsiders[:15]}/").status_code == 404
    assert api_status(outsiders) == 200
    assert client.delete(f"/api/tokens/{key[:15]}/").status_code == 204
    assert api_status(key) == 401


def test_a_session_cannot_mint_tokens_without_end(owner, settings):
    settings.API_TOKENS_PER_USER = 3
    pages = Client()
    pages.force_login(owner)
    made = [pages.post("/accounts/tokens/new/") for _ in range(4)]
    assert [answer.status_code for answer in made] == [302, 302, 302, 302]
    assert "already has 3 tokens" in pages.get("/accounts/tokens/").content.decode()
    assert AuthToken.objects.filter(user=owner).count() == 3
    with pytest.raises(CommandError, match="revoke one first"):
        made_key(owner)
