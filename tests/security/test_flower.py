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

PORT = int(os.environ.get("TEST_PORT_BASE", "6390")) + 55
GOOD = "ops:correct-horse-battery"


def flower(credentials, *args):
    env = {**os.environ, "CELERY_BROKER_URL": settings.CELERY_BROKER_URL, "PYTHONPATH": str(REPO)}
    env.pop("FLOWER_BASIC_AUTH", None)
    if credentials is not None:
        env["FLOWER_BASIC_AUTH"] = credentials
    return subprocess.Popen([sys.executable, "-m", "scheduler_site.flower", "--address=127.0.0.1", f"--port={PORT}",
                             *args], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
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
