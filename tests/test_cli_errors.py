"""jobsctl's errors and configuration against a live service: each is one line on stderr with its
exit code (no token, a refused token, not allowed, unreachable, not the API, a server failure,
usage), and the URL and token come from the documented places in the documented order."""

import json
import signal
import socket

import pytest
from django.contrib.auth.models import User

from jobs.access import tokens as api_tokens
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus

from .cli_support import Web, free_port
from .local_http import LocalHTTPServer, QuietHandler

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def token(transactional_db):
    user = User.objects.create_user("owner")
    save_job(Job(name="mine", kind="callable", target="builtin.noop", owner=user), {"type": "manual"})
    return api_tokens.create(user)[1]


def answering_server(status, body, content_type):
    """A local HTTP server that answers every GET with a fixed status and body."""

    class Handler(QuietHandler):
        def do_GET(self):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.end_headers()
            self.wfile.write(body)

    return LocalHTTPServer(Handler)


def write_config(jobsctl, text, mode=0o600):
    path = jobsctl.home / ".config" / "jobsctl" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def test_no_token_exits_4(jobsctl):
    result = jobsctl("list")
    assert result.returncode == 4
    assert result.stderr.startswith("jobsctl: no token: set JOBSCTL_TOKEN, or token in ")
    assert result.stdout == ""


def test_a_bad_token_exits_4_naming_where_it_came_from(jobsctl, token):
    result = jobsctl("list", token="not-a-token")
    assert result.returncode == 4
    assert result.stderr == "jobsctl: the server refused the token from JOBSCTL_TOKEN: Invalid token.\n"


def test_after_refused_tokens_even_a_good_one_exits_4_saying_it_is_locked_out(jobsctl, token, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        assert jobsctl("list", token="0" * 64).returncode == 4
    result = jobsctl("list", token=token)
    assert result.returncode == 4
    seconds = settings.AXES_COOLOFF_TIME.total_seconds()
    assert result.stderr == ("jobsctl: the server refused the token from JOBSCTL_TOKEN: Too many refused tokens "
                             f"from this address: it is locked out. Expected available in {seconds:.0f} seconds.\n")


def test_a_quota_refusal_exits_4_naming_the_quota_not_the_token(jobsctl, token, tmp_path):
    quota = Web(tmp_path, JOBS_MAX_RUNS_PER_HOUR_PER_USER="1", JOBS_MAX_RUNS_IN_FLIGHT_PER_USER="0")
    try:
        quota.wait_until_up()
        assert jobsctl("run", "mine", token=token, JOBSCTL_URL=quota.url).returncode == 0
        refused = jobsctl("run", "mine", token=token, JOBSCTL_URL=quota.url)
    finally:
        quota.stop()
    assert refused.returncode == 4
    assert refused.stderr == ("jobsctl: refused: You started 1 run(s) in the last hour; at most 1 per hour "
                              "(JOBS_MAX_RUNS_PER_HOUR_PER_USER).\n")
    assert JobRun.objects.count() == 1


def test_an_unreachable_server_exits_5(jobsctl, token):
    port = free_port()
    result = jobsctl("--url", f"http://127.0.0.1:{port}", "list", token=token)
    assert result.returncode == 5
    assert result.stderr == f"jobsctl: cannot reach http://127.0.0.1:{port}: connection refused.\n"


def test_a_server_that_does_not_answer_in_time_exits_5(jobsctl, token):
    with socket.socket() as listener:  # accepts connections and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(5)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        result = jobsctl("--url", url, "--http-timeout", "0.5", "list", token=token)
    assert result.returncode == 5
    assert result.stderr == f"jobsctl: {url} did not answer within 0.5 s.\n"


def test_something_that_is_not_the_api_exits_8(jobsctl, token):
    with answering_server(200, b"<html>a blog</html>", "text/html") as blog:
        result = jobsctl("--url", blog.url, "list", token=token)
    assert result.returncode == 8
    assert result.stderr == (f"jobsctl: {blog.url} answered text/html, not the job scheduler's API: is the URL "
                             "right (from --url)?\n")
    with answering_server(502, b"bad gateway", "text/plain") as proxy:
        failed = jobsctl("list", token=token, JOBSCTL_URL=proxy.url)
    assert failed.returncode == 8
    assert failed.stderr == f"jobsctl: {proxy.url} failed: HTTP 502 for GET /api/jobs/.\n"


def test_usage_errors_exit_2(jobsctl, token):
    assert jobsctl("list", "--kind", "shell", token=token).returncode == 2
    assert jobsctl("frobnicate", token=token).returncode == 2
    bad_url = jobsctl("list", token=token, JOBSCTL_URL="scheduler.example.com")
    assert bad_url.returncode == 2
    assert bad_url.stderr == ("jobsctl: JOBSCTL_URL: 'scheduler.example.com' is not an http(s) URL such as "
                              "https://scheduler.example.com.\n")


def test_the_config_file_gives_url_and_token(jobsctl, token, web):
    write_config(jobsctl, f'url = "{web.url}"\ntoken = "{token}"\n')
    result = jobsctl("list", "--json", JOBSCTL_URL="")
    assert result.returncode == 0, result.stderr
    assert [job["name"] for job in json.loads(result.stdout)] == ["mine"]
    sources = json.loads(jobsctl("config", "--json", JOBSCTL_URL="").stdout)
    assert sources["url"] == web.url and sources["token_from"].endswith("config.toml")


def test_a_config_file_others_can_read_is_refused(jobsctl, token):
    path = write_config(jobsctl, f'token = "{token}"\n', mode=0o644)
    result = jobsctl("list")
    assert result.returncode == 2
    assert result.stderr == (f"jobsctl: {path} holds a token and other users may read it (mode 0644): "
                             f"run chmod 600 {path}\n")


def test_the_environment_wins_over_the_file_and_the_url_option_over_both(jobsctl, token, web):
    write_config(jobsctl, 'url = "http://127.0.0.1:1"\ntoken = "stale-token"\n')
    assert jobsctl("list", token=token, JOBSCTL_URL="").returncode == 5  # the file's URL, the env's token
    assert jobsctl("list", JOBSCTL_URL=web.url).returncode == 4  # the env's URL, the file's (stale) token
    assert jobsctl("list", token=token).returncode == 0  # the env's URL and token
    option = jobsctl("--url", web.url, "list", token=token, JOBSCTL_URL="http://127.0.0.1:1")
    assert option.returncode == 0
    sources = json.loads(jobsctl("--url", web.url, "config", "--json", token=token).stdout)
    assert (sources["url_from"], sources["token_from"]) == ("--url", "JOBSCTL_TOKEN")


def test_a_broken_or_named_config_file_is_a_usage_error(jobsctl, token):
    path = write_config(jobsctl, 'url = "http://unclosed\n')
    broken = jobsctl("list", token=token)
    assert broken.returncode == 2 and broken.stderr.startswith(f"jobsctl: {path}: not valid TOML")
    write_config(jobsctl, 'server = "http://a.example"\n')
    unknown = jobsctl("list", token=token)
    assert unknown.returncode == 2 and "unknown key(s) server" in unknown.stderr
    named = jobsctl("--config", jobsctl.home / "nope.toml", "list", token=token)
    assert named.returncode == 2 and named.stderr.endswith("nope.toml: no such config file.\n")
    other = jobsctl.home / "other.toml"
    other.write_text('token = "x"\n')
    other.chmod(0o600)
    assert jobsctl("list", JOBSCTL_CONFIG=other).returncode == 4  # that file's token, refused by the server


def test_ctrl_c_while_waiting_exits_130_and_leaves_the_run_alone(jobsctl, token):
    waiting = jobsctl.start("run", "mine", "--wait", token=token)  # no worker: the run stays queued
    try:
        # The line on stderr says the run is queued and the waiting has begun.
        assert "waiting for it to end" in waiting.stderr.readline()
        waiting.send_signal(signal.SIGINT)
        stdout, stderr = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
    assert waiting.returncode == 130
    assert stderr.strip() == "jobsctl: interrupted." and "Traceback" not in stderr  # after the line ^C left open
    assert JobRun.objects.get().status == RunStatus.QUEUED
