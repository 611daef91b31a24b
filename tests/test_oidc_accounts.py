"""Single sign-on's accounts and teams from the provider's claims (sso.accounts, sso.backend), without a
provider: tests/test_oidc_login.py signs on through a real one in a browser."""

import io
import os
import socket
import subprocess
import sys

import jwt
import pytest
from django.contrib.auth.models import Group, User
from django.core.exceptions import SuspiciousOperation
from django.core.management import CommandError, call_command
from django.test import RequestFactory

from jobs.actions.permissions import COMMAND_RUNNERS_GROUP
from sso.accounts import SignOnRefused, sign_on
from sso.backend import TeamsFromClaims
from sso.models import Identity

from .conftest import REPO

ISSUER = "https://id.example.com"


def claims(sub="u-1", **more):
    return {"sub": sub, "preferred_username": "alice", "email": "alice@example.com", **more}


def teams(user):
    return set(user.groups.values_list("name", flat=True))


@pytest.mark.django_db
def test_it_leaves_the_teams_the_claim_no_longer_names_and_keeps_those_given_in_the_admin():
    alice = sign_on(ISSUER, claims(groups=["analysts", "ops"]))
    alice.groups.add(Group.objects.create(name="auditors"))  # given by staff in the admin

    alice = sign_on(ISSUER, claims(groups=["analysts", "finance"]))

    assert teams(alice) == {"analysts", "finance", "auditors"}
    assert User.objects.count() == 1


@pytest.mark.django_db
def test_a_team_the_user_was_in_before_the_claim_named_it_is_not_taken_away_by_the_claim():
    staff_given = Group.objects.create(name="analysts")
    alice = sign_on(ISSUER, claims(groups=[]))
    alice.groups.add(staff_given)

    sign_on(ISSUER, claims(groups=["analysts"]))
    alice = sign_on(ISSUER, claims(groups=[]))

    assert teams(alice) == {"analysts"}


@pytest.mark.django_db
def test_a_claim_never_grants_command_job_runners_nor_a_protected_group(settings):
    settings.OIDC_PROTECTED_GROUPS = ["Administrators"]

    alice = sign_on(ISSUER, claims(groups=[COMMAND_RUNNERS_GROUP, "Administrators", "analysts"]))

    assert teams(alice) == {"analysts"}
    assert not Group.objects.filter(name="Administrators").exists()
    assert not alice.has_perm("jobs.run_command_jobs")
    assert not alice.is_staff and not alice.is_superuser


@pytest.mark.django_db
def test_a_team_joined_by_a_claim_is_left_once_it_is_protected(settings):
    sign_on(ISSUER, claims(groups=["Administrators"]))
    settings.OIDC_PROTECTED_GROUPS = ["Administrators"]

    alice = sign_on(ISSUER, claims(groups=["Administrators"]))

    assert teams(alice) == set()


@pytest.mark.django_db
def test_the_same_subject_keeps_its_account_when_its_name_changes_at_the_provider():
    first = sign_on(ISSUER, claims(groups="analysts"))  # one name, not a list
    again = sign_on(ISSUER, claims(preferred_username="alice.smith", email="alice.smith@example.com"))

    assert again.pk == first.pk and again.username == "alice"
    assert again.email == "alice.smith@example.com"
    assert Identity.objects.get().subject == "u-1"


@pytest.mark.django_db
def test_the_user_name_is_the_email_when_the_preferred_name_is_not_a_user_name():
    user = sign_on(ISSUER, claims(preferred_username="Alice Smith (HR)", email="alice@example.com"))

    assert user.username == "alice@example.com"


@pytest.mark.django_db
def test_it_refuses_a_local_accounts_name_whatever_its_case_and_a_person_with_no_usable_name():
    User.objects.create_user("Alice", password="local-pass-1")

    with pytest.raises(SignOnRefused, match="An account named 'alice' already exists"):
        sign_on(ISSUER, claims())
    with pytest.raises(SignOnRefused, match="neither a preferred_username nor an email"):
        sign_on(ISSUER, claims(sub="u-2", preferred_username="", email="not an address?"))
    with pytest.raises(SignOnRefused, match="no usable subject"):
        sign_on(ISSUER, claims(sub=""))
    assert not Identity.objects.exists() and User.objects.count() == 1


@pytest.mark.django_db
def test_another_provider_with_the_same_subject_is_another_person():
    sign_on(ISSUER, claims())

    with pytest.raises(SignOnRefused, match="already exists"):
        sign_on("https://other.example.com", claims())


def test_a_password_login_is_never_sent_to_the_provider(settings):
    settings.OIDC_ENABLED = True
    request = RequestFactory().post("/accounts/login/?code=stolen&state=any")

    # No provider is configured here: an exchange would fail loudly rather than return None.
    assert TeamsFromClaims().authenticate(request, username="alice", password="guess") is None


def test_an_id_token_issued_to_another_client_is_refused(settings):
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET, settings.OIDC_RP_SIGN_ALGO = "ours", "s" * 32, "HS256"
    backend = TeamsFromClaims()
    theirs = jwt.encode({"sub": "u-1", "aud": "theirs", "nonce": "n"}, "s" * 32, algorithm="HS256")
    ours = jwt.encode({"sub": "u-1", "aud": ["ours"], "nonce": "n"}, "s" * 32, algorithm="HS256")

    with pytest.raises(SuspiciousOperation, match="another client"):
        backend.verify_token(theirs, nonce="n")
    assert backend.verify_token(ours, nonce="n")["sub"] == "u-1"


def test_single_sign_on_is_off_without_a_client_id(client):
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=x&state=y").status_code == 404
    assert "Sign in with" not in client.get("/accounts/login/").content.decode()


def test_a_client_id_without_the_providers_endpoints_stops_the_service_at_start():
    env = {**os.environ, "PYTHONPATH": str(REPO), "DJANGO_SETTINGS_MODULE": "scheduler_site.settings",
           "OIDC_RP_CLIENT_ID": "scheduler", "OIDC_RP_CLIENT_SECRET": "",
           "OIDC_OP_AUTHORIZATION_ENDPOINT": "https://id.example.com/authorize"}
    result = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, cwd=REPO,
                            capture_output=True, text=True, timeout=120)

    assert result.returncode != 0
    assert ("OIDC_RP_CLIENT_ID turns single sign-on on; it needs OIDC_OP_TOKEN_ENDPOINT, OIDC_OP_USER_ENDPOINT, "
            "OIDC_OP_JWKS_ENDPOINT (for OIDC_RP_SIGN_ALGO=RS256), OIDC_RP_CLIENT_SECRET") in result.stderr


@pytest.fixture
def provider_settings(settings):
    """Single sign-on on, towards a provider that listens nowhere (a port just closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{sock.getsockname()[1]}/openid"
    settings.OIDC_ENABLED, settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = True, "ours", "s" * 32
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = f"{nowhere}/authorize"
    settings.OIDC_OP_TOKEN_ENDPOINT, settings.OIDC_OP_USER_ENDPOINT = f"{nowhere}/token", f"{nowhere}/userinfo"
    settings.OIDC_OP_JWKS_ENDPOINT, settings.OIDC_TIMEOUT = f"{nowhere}/jwks", 2
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, "sso.backend.TeamsFromClaims"]
    return settings


def begun_state(client):
    begun = client.get("/oidc/authenticate/?next=/jobs/")
    assert begun.status_code == 302 and begun["Location"].startswith("http://127.0.0.1:")
    return next(iter(client.session["oidc_states"]))


@pytest.mark.django_db
def test_the_provider_out_of_reach_answers_a_page_saying_so(provider_settings, client):
    state = begun_state(client)

    answer = client.get(f"/oidc/callback/?code=some-code&state={state}")

    assert answer.status_code == 502
    assert "The identity provider could not be reached" in answer.content.decode()
    assert not User.objects.exists()


@pytest.mark.django_db
def test_a_deactivated_account_cannot_sign_on(provider_settings, client, monkeypatch):
    alice = sign_on(ISSUER, claims())
    User.objects.filter(pk=alice.pk).update(is_active=False)
    # The provider's part (token, keys, userinfo) as it answers for alice: only what follows is ours.
    monkeypatch.setattr(TeamsFromClaims, "get_token", lambda self, payload: {"id_token": "t", "access_token": "a"})
    monkeypatch.setattr(TeamsFromClaims, "verify_token", lambda self, token, **kw: {"iss": ISSUER, "sub": "u-1"})
    monkeypatch.setattr(TeamsFromClaims, "get_userinfo", lambda self, *args: claims())
    state = begun_state(client)

    answer = client.get(f"/oidc/callback/?code=some-code&state={state}")

    assert answer.status_code == 403
    assert "Your account here is deactivated" in answer.content.decode()
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_an_operator_links_a_local_account_to_a_person_at_the_provider():
    local = User.objects.create_user("alice", password="local-pass-1")
    local.groups.add(Group.objects.create(name="auditors"))
    out = io.StringIO()

    call_command("sso", "link", "alice", "u-1", "--issuer", ISSUER, stdout=out)
    alice = sign_on(ISSUER, claims(groups=["analysts"]))

    assert "u-1 of https://id.example.com now signs on as alice" in out.getvalue()
    assert alice.pk == local.pk and teams(alice) == {"auditors", "analysts"}
    with pytest.raises(CommandError, match="already signs on as alice"):
        call_command("sso", "link", "alice", "u-1", "--issuer", ISSUER)
    call_command("sso", "unlink", "alice", stdout=io.StringIO())
    with pytest.raises(SignOnRefused, match=r"link it to you \(manage.py sso link\)"):
        sign_on(ISSUER, claims())
