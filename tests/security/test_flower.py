"""Flower, the real process: it does not start without credentials, and a running one answers 401
to a request without credentials, with empty ones or with wrong ones."""

import base64
import os
import subprocess
import sys
import time

import pytest
import requests
from django.conf import settings

from ..conftest import REPO

# Like every test that starts processes, once, on PostgreSQL (Flower's login does not touch the database).
pytestmark = pytest.mark.postgres("starts Flower processes")

PORT = int(os.environ.get("TEST_PORT_BASE", "6390")) + 55
GOOD = "ops:correct-horse-battery"


def flower(credentials, *args, cwd=REPO):
    env = {**os.environ, "CELERY_BROKER_URL": settings.CELERY_BROKER_URL, "PYTHONPATH": str(REPO)}
    env.pop("FLOWER_BASIC_AUTH", None)
    if credentials is not None:
        env["FLOWER_BASIC_AUTH"] = credentials
    return subprocess.Popen([sys.executable, "-m", "scheduler_site.flower", "--address=127.0.0.1", f"--port={PORT}",
                             *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)


@pytest.mark.parametrize("credentials", [None, "", " ", "ops:", ":secret-password", "ops", "ops:short",
                                         f"{GOOD},admin:"])
def test_it_refuses_to_start_without_usable_credentials(credentials):
    proc = flower(credentials)
    try:
        output, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 2
    assert b"flower: refusing to start" in output and b"FLOWER_BASIC_AUTH" in output


def test_it_refuses_credentials_on_the_command_line():
    proc = flower(GOOD, "--basic-auth=ops:correct-horse-battery")
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2 and b"not as options" in output


def refusal(proc):
    """What the guard printed as it refused to start (a Flower that starts instead fails the test)."""
    try:
        output, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait(timeout=10)
        pytest.fail("Flower started")
    assert proc.returncode == 2
    assert b"flower: refusing to start" in output
    return output.decode()


@pytest.mark.parametrize("option", ["-unauthenticated_api", "-unauthenticated-api=true", "--unauthenticated_api=true",
                                    "-auth=.*@example\\.com", "--AUTH=.*", "-basic_auth=ops:correct-horse-battery",
                                    "-auth_provider=flower.views.auth.GithubLoginHandler", "--conf=elsewhere.py"])
def test_it_refuses_tornado_spellings_of_the_authentication_options(option):
    assert "not as options" in refusal(flower(GOOD, option))


def test_it_refuses_a_flowerconfig_in_its_working_directory_and_never_runs_it(tmp_path):
    ran = tmp_path / "flowerconfig-ran"
    (tmp_path / "flowerconfig.py").write_text(f"open({str(ran)!r}, 'w').close()\nunauthenticated_api = True\n")
    assert "flowerconfig.py exists" in refusal(flower(GOOD, cwd=tmp_path))
    assert not ran.exists()


@pytest.mark.parametrize("credentials", ["ops:password1", "admin:adminadmin", "ops:1234567890123",
                                         f"{GOOD},backup:qwertyuiop"])
def test_it_refuses_a_password_the_sites_validators_refuse(credentials):
    output = refusal(flower(credentials))
    assert "FLOWER_BASIC_AUTH: the password of" in output
    assert credentials.rpartition(":")[2] not in output


@pytest.fixture(scope="module")
def running_flower():
    proc = flower(GOOD)
    deadline = time.monotonic() + 60
    while True:
        try:
            requests.get(f"http://127.0.0.1:{PORT}/healthcheck", timeout=2)
            break
        except requests.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"Flower did not start: {proc.communicate()[0].decode(errors='replace')[-2000:]}")
            time.sleep(0.3)
    yield f"http://127.0.0.1:{PORT}"
    os.killpg(proc.pid, 9)
    proc.wait(timeout=10)


def basic(credentials):
    return {"Authorization": "Basic " + base64.b64encode(credentials.encode()).decode()}


@pytest.mark.parametrize("headers", [
    {}, basic(""), basic(":"), basic("ops:"), basic(":correct-horse-battery"), basic("ops:wrong-password"),
    {"Authorization": "Basic"}, {"Authorization": "Bearer correct-horse-battery"},
], ids=["anonymous", "empty", "colon", "user-only", "password-only", "wrong", "no-credentials", "bearer"])
@pytest.mark.parametrize("path", ["/", "/api/workers", "/tasks"])
def test_a_running_flower_answers_401_without_the_credentials(running_flower, headers, path):
    response = requests.get(running_flower + path, headers=headers, timeout=10)
    assert response.status_code == 401


def test_a_running_flower_answers_its_credentials(running_flower):
    assert requests.get(running_flower + "/api/workers", headers=basic(GOOD), timeout=10).status_code == 200
