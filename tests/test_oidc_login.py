"""Single sign-on through a real OpenID Connect provider: django-oidc-provider in a Django project of
its own (tests/oidc_provider/), served by gunicorn in a process of its own; the service served by
gunicorn on the test database with the OIDC_* settings pointing at it; a real browser (Chromium)
signing on through the provider's login form and consent page."""

import importlib.util
import os
import subprocess
import sys

import pytest
import requests
from django.contrib.auth.models import Group, User

from jobs.actions.permissions import COMMAND_RUNNERS_GROUP
from jobs.definitions.jobs import save_job
from jobs.models import Job
from sso.models import Identity

from .cli_support import Web, free_port
from .conftest import REPO, require
from .test_browser import browser_page  # noqa: F401  (the fixture, which needs Chromium)

pytestmark = pytest.mark.postgres("starts web processes on the test database")

PORT_BASE = int(os.environ.get("TEST_PORT_BASE", "6390")) + 60  # this session's range, clear of tests/cli_support
CLIENT_ID, CLIENT_SECRET = "scheduler", "client-secret-for-tests"
PROVIDER_NAME = "Example IdP"
# On the provider: alice in two teams and in the service's staff-like group (which must not carry over),
# bob whose name a local account of the service already has.
PROVIDER_USERS = [f"alice:alice-op-pass:alice@example.com:analysts,{COMMAND_RUNNERS_GROUP}",
                  "bob:bob-op-pass:bob@example.com:analysts"]


class Provider(Web):
    """gunicorn serving tests/oidc_provider/ on a SQLite database of its own, with the client and the users
    made by its provider_setup command."""

    def __init__(self, folder, port, redirect_uri):
        self.port, self.url = port, f"http://127.0.0.1:{port}"
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO), "LANG": "C.UTF-8",
                    "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
                    "OP_DATABASE": str(folder / "provider.sqlite3")}
        self.log_path = folder / "provider.log"
        django = [sys.executable, "-m", "django"]
        for argv in (["migrate", "-v0"],
                     ["provider_setup", "--client-id", CLIENT_ID, "--client-secret", CLIENT_SECRET,
                      "--redirect-uri", redirect_uri, *[a for spec in PROVIDER_USERS for a in ("--user", spec)]]):
            done = subprocess.run(django + argv, env=self.env, cwd=REPO, timeout=120, capture_output=True, text=True)
            if done.returncode != 0:
                pytest.fail(f"the provider's {argv[0]} failed:\n{done.stdout}{done.stderr}")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "tests.oidc_provider.wsgi", "-b", f"127.0.0.1:{port}",
                 "--workers", "1", "--threads", "4", "--no-control-socket"],
                cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def endpoint(self, name):
        return f"{self.url}/openid/{name}"


@pytest.fixture(scope="module")
def signing_on(django_db_setup, django_db_blocker, tmp_path_factory):
    """The provider and the service, each in a process of its own, killed (by PID) at the end."""
    require(importlib.util.find_spec("oidc_provider") is not None,
            "django-oidc-provider is not installed (pip install -r requirements-dev.txt)")
    folder = tmp_path_factory.mktemp("oidc")
    provider_port = free_port(PORT_BASE)
    service_port = free_port(provider_port + 1)
    provider = Provider(folder, provider_port, f"http://127.0.0.1:{service_port}/oidc/callback/")
    service = None
    try:
        provider.wait_until_up()
        service = Web(folder, port=service_port,
                      OIDC_RP_CLIENT_ID=CLIENT_ID, OIDC_RP_CLIENT_SECRET=CLIENT_SECRET,
                      OIDC_OP_AUTHORIZATION_ENDPOINT=provider.endpoint("authorize"),
                      OIDC_OP_TOKEN_ENDPOINT=provider.endpoint("token"),
                      OIDC_OP_USER_ENDPOINT=provider.endpoint("userinfo"),
                      OIDC_OP_JWKS_ENDPOINT=provider.endpoint("jwks"), OIDC_RP_SIGN_ALGO="RS256",
                      OIDC_RP_SCOPES="openid email profile groups", OIDC_PROVIDER_NAME=PROVIDER_NAME)
        service.wait_until_up()
        yield provider, service
    finally:
        if service is not None:
            service.stop()
        provider.stop()


def sign_on(page, service, user, password, path="/jobs/"):
    """Through the login page's button, the provider's login form and its consent page."""
    page.goto(f"{service.url}{path}")
    assert "/accounts/login/" in page.url
    page.click(f"text=Sign in with {PROVIDER_NAME}")
    page.fill("#op-username", user)
    page.fill("#op-password", password)
    page.click("#op-login")
    page.wait_for_selector("input[name=allow]")  # the provider's consent page
    page.click("input[name=allow]")
    page.wait_for_load_state()


def test_it_signs_on_through_the_provider_into_the_teams_of_the_groups_claim(
        signing_on, transactional_db, browser_page):  # noqa: F811
    provider, service = signing_on
    analysts, finance = Group.objects.create(name="analysts"), Group.objects.create(name="finance")
    save_job(Job(name="nightly-analytics", kind="callable", target="builtin.noop", group=analysts), {"type": "manual"})
    save_job(Job(name="payroll-export", kind="callable", target="builtin.noop", group=finance), {"type": "manual"})
    page = browser_page

    sign_on(page, service, "alice", "alice-op-pass")

    page.wait_for_url(f"{service.url}/jobs/")
    body = page.inner_text("body")
    assert "nightly-analytics" in body  # her team's job
    assert "payroll-export" not in body  # another team's
    alice = User.objects.get(username="alice")
    assert alice.email == "alice@example.com"
    assert set(alice.groups.values_list("name", flat=True)) == {"analysts"}  # not "Command job runners"
    assert not alice.is_staff and not alice.is_superuser
    assert not alice.has_usable_password()
    identity = Identity.objects.get(user=alice)
    assert identity.issuer == f"{provider.url}/openid"
    assert set(identity.managed_groups.values_list("name", flat=True)) == {"analysts"}


def test_a_local_account_still_logs_in_beside_single_sign_on(signing_on, transactional_db, browser_page):  # noqa: F811
    _, service = signing_on
    User.objects.create_user("carol", password="carol-local-pass-1")
    page = browser_page

    page.goto(f"{service.url}/jobs/")
    assert f"Sign in with {PROVIDER_NAME}" in page.inner_text("body")
    page.fill("input[name=username]", "carol")
    page.fill("input[name=password]", "carol-local-pass-1")
    page.click("button.primary")

    page.wait_for_url(f"{service.url}/jobs/")
    assert "carol" in page.inner_text("nav") and "Log out" in page.inner_text("nav")
    assert not Identity.objects.exists()


def test_signing_on_never_takes_over_a_local_account_of_the_same_name(
        signing_on, transactional_db, browser_page):  # noqa: F811
    _, service = signing_on
    User.objects.create_user("bob", password="bob-local-pass-1", email="bob@local.example")
    page = browser_page

    sign_on(page, service, "bob", "bob-op-pass")

    page.wait_for_url(f"{service.url}/oidc/callback/**")
    body = page.inner_text("body")
    assert f"Signing on with {PROVIDER_NAME} failed" in body
    assert "An account named 'bob' already exists here" in body
    bob = User.objects.get(username="bob")
    assert bob.email == "bob@local.example" and bob.check_password("bob-local-pass-1")
    assert not bob.groups.exists() and not Identity.objects.exists()
    page.goto(f"{service.url}/jobs/")
    assert "/accounts/login/" in page.url  # not signed in as the local bob


def test_a_tampered_or_failed_callback_answers_an_error_page(signing_on, transactional_db):
    _, service = signing_on
    callback = f"{service.url}/oidc/callback/"

    # No sign-in was begun in this session.
    forged = requests.get(callback, params={"code": "forged", "state": "forged"}, timeout=30)
    assert forged.status_code == 400
    assert "Signing on did not complete" in forged.text

    # One was begun, but the state is not its own.
    browser = requests.Session()
    begun = browser.get(f"{service.url}/oidc/authenticate/", allow_redirects=False, timeout=30)
    assert begun.status_code == 302 and begun.headers["Location"].startswith(signing_on[0].endpoint("authorize"))
    other_state = browser.get(callback, params={"code": "forged", "state": "not-the-one-sent"}, timeout=30)
    assert other_state.status_code == 400
    assert "not one this service asked for" in other_state.text

    # Its own state, with a code the provider never gave: the provider refuses it.
    state = dict(p.split("=", 1) for p in begun.headers["Location"].split("?", 1)[1].split("&"))["state"]
    forged_code = browser.get(callback, params={"code": "forged", "state": state}, timeout=30)
    assert forged_code.status_code == 400
    assert "The identity provider did not accept this sign-in" in forged_code.text

    # The person declined at the provider.
    declined = browser.get(callback, params={"error": "access_denied", "state": state}, timeout=30)
    assert declined.status_code == 400
    assert "did not sign you in (access_denied)" in declined.text
    assert not User.objects.exists()
