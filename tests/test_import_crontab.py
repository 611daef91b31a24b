"""manage.py jobs import crontab FILE: a real crontab of more than 20 lines with its odd cases, each
job's next slots against croniter's reading of its line, and bad input that imports nothing."""

import subprocess
from datetime import UTC, datetime
from io import StringIO
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from django.core.management import CommandError, call_command

from jobs import lifecycle
from jobs.models import Job, JobRun, RunStatus
from notifications.models import Channel, Rule

from .conftest import manage_py, wait_for

pytestmark = pytest.mark.django_db

CRONTAB = r"""# m h  dom mon dow   command
SHELL=/bin/sh
PATH=/usr/local/bin:/usr/bin:/bin
MAILTO=ops@example.com,dba@example.com

# every five minutes
*/5 * * * * /usr/local/bin/poll-queue --batch 50
0 * * * *   echo hourly >> /var/log/hourly.log
15 3 * * *  pg_dump app | gzip > /backups/app-$(date +\%F).sql.gz
30 4 1 * *  /opt/reports/monthly.sh
0 9 * * 1-5 /opt/reports/weekday.sh
0 18 * * mon,wed,fri  /opt/reports/mwf.sh
0 0 1 jan *  /opt/reports/new-year.sh
@daily       /usr/bin/find /tmp -mtime +7 -delete
@hourly      /usr/bin/true
@weekly      /opt/maintenance/vacuum.sh
@monthly     /opt/maintenance/rotate.sh
@yearly      /opt/maintenance/archive.sh
@reboot      /opt/start-agent.sh
0 12 * * *   mail -s "noon report" ops@example.com%Hello,%%the report is attached.%50\% done
0 1 13 * 5   /opt/odd/friday-or-13th.sh
MAILTO=""
GREETING = "hello world"
*/15 9-17 * * 1-5 /opt/business-hours.sh
CRON_TZ=Europe/Berlin
0 2 * * *    /opt/berlin/nightly.sh
30 6 * * 0,7 /opt/berlin/sunday.sh
CRON_TZ=Asia/Kolkata
45 23 * * *  /opt/kolkata/late.sh
MAILTO=night@example.com
5 4 * * sun  /opt/kolkata/sunday.sh
"""


def run_import(path, *args):
    out = StringIO()
    call_command("jobs", "import", "crontab", str(path), *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def crontab_file(tmp_path):
    path = tmp_path / "crontab"
    path.write_text(CRONTAB)
    return path


def job_of_line(number):
    return Job.objects.select_related("crontab").get(description__startswith=f"Line {number} of a crontab:")


def line_number(text):
    return next(i for i, line in enumerate(CRONTAB.splitlines(), 1) if text in line)


def croniter_slots(line, zone, after, count):
    """The line's next slots as cron reads them (croniter, in the line's zone)."""
    fields = line.split()
    expression = {
        "@daily": "@daily",
        "@hourly": "@hourly",
        "@weekly": "@weekly",
        "@monthly": "@monthly",
        "@yearly": "@yearly",
    }.get(fields[0]) or " ".join(fields[:5])
    it = croniter(expression, after.astimezone(ZoneInfo(zone)))
    return [it.get_next(datetime).astimezone(UTC) for _ in range(count)]


def test_a_real_crontab_carries_over(crontab_file):
    out = run_import(crontab_file)
    lines = CRONTAB.splitlines()
    jobs = list(Job.objects.select_related("crontab"))
    assert len(jobs) == 19  # 20 command lines, @reboot refused
    after = datetime(2026, 6, 1, tzinfo=UTC)
    zones = {"/opt/berlin/": "Europe/Berlin", "/opt/kolkata/": "Asia/Kolkata"}
    for job in jobs:
        number = int(job.description.split()[1])
        line = lines[number - 1]
        zone = next((z for prefix, z in zones.items() if prefix in line), "UTC")
        assert str(job.crontab.timezone) == zone, line
        assert job.upcoming_slots(10, after=after) == croniter_slots(line, zone, after, 10), line
        assert (job.kind, job.enabled, job.tags) == ("command", True, ["crontab"])

    poll = job_of_line(line_number("poll-queue"))
    assert poll.target == "/usr/local/bin/poll-queue --batch 50"
    assert poll.environment == {
        "SHELL": "/bin/sh",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "MAILTO": "ops@example.com,dba@example.com",
    }
    assert poll.name.startswith("cron-usr-local-bin-poll-queue-batch-50-")
    dump = job_of_line(line_number("pg_dump"))
    assert dump.target == "pg_dump app | gzip > /backups/app-$(date +%F).sql.gz"  # \% is a literal %
    assert job_of_line(line_number("@weekly")).cron_expression == "0 0 * * 0"
    greeted = job_of_line(line_number("business-hours"))
    assert greeted.environment["GREETING"] == "hello world" and greeted.environment["MAILTO"] == ""

    noon = job_of_line(line_number("noon report"))
    assert noon.target.startswith("printf '%s' ")
    result = subprocess.run(
        ["/bin/sh", "-c", noon.target.replace('mail -s "noon report" ops@example.com', "cat")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout == "Hello,\n\nthe report is attached.\n50% done"  # % a new line, \% a %

    assert f"line {line_number('@reboot')}: not carried over: @reboot runs when cron starts" in out
    assert "Lines before any CRON_TZ are read in UTC (--timezone): cron reads them in its host's zone." in out

    # MAILTO: one email channel per address list, a rule per job on what went wrong.
    channels = {c.name: c.config["recipients"] for c in Channel.objects.all()}
    assert channels == {
        "mail ops@example.com, dba@example.com": ["ops@example.com", "dba@example.com"],
        "mail night@example.com": ["night@example.com"],
    }
    rules = Rule.objects.select_related("job", "channel")
    assert {r.job.name for r in rules if r.channel.name == "mail night@example.com"} == {
        job_of_line(line_number("kolkata/sunday")).name
    }
    assert rules.filter(channel__name__startswith="mail ops").count() == 14
    assert all(rule.events == ["failed", "timed_out", "lost"] and rule.scope == "job" for rule in rules)
    assert not Rule.objects.filter(job=greeted).exists()  # MAILTO="": no mail
    assert "imported: 19 jobs, 2 channels, 15 rules created." in out


def test_running_it_again_changes_nothing(crontab_file):
    run_import(crontab_file)
    before = {job.name: (job.updated_at, job.next_run_at) for job in Job.objects.all()}
    counts = (Channel.objects.count(), Rule.objects.count())
    out = run_import(crontab_file)
    assert "imported: 0 jobs created." in out
    assert {job.name: (job.updated_at, job.next_run_at) for job in Job.objects.all()} == before
    assert (Channel.objects.count(), Rule.objects.count()) == counts


def test_dry_run_writes_nothing(crontab_file):
    out = run_import(crontab_file, "--dry-run")
    assert "dry run: the import is valid; nothing was saved." in out
    assert not Job.objects.exists() and not Channel.objects.exists() and not Rule.objects.exists()


def test_a_malformed_line_is_named_and_nothing_is_imported(tmp_path):
    path = tmp_path / "crontab"
    path.write_text(
        CRONTAB + "61 * * * * /bin/too-late\n*/5 * * /bin/short\n@fortnightly /bin/x\nCRON_TZ=Mars/Olympus\n"
    )
    with pytest.raises(CommandError, match="nothing was imported") as refused:
        run_import(path)
    message = str(refused.value)
    count = len(CRONTAB.splitlines())
    assert f"line {count + 1}: '61 * * * *' is not a valid cron expression.: 61 * * * * /bin/too-late" in message
    assert f"line {count + 2}: a crontab line is five time fields and a command: */5 * * /bin/short" in message
    assert f"line {count + 3}: '@fortnightly' is not one of @yearly" in message
    assert f"line {count + 4}: CRON_TZ: 'Mars/Olympus' is not a known IANA timezone." in message
    assert not Job.objects.exists() and not Channel.objects.exists()


def test_no_zone_is_read_in_the_given_one(tmp_path):
    path = tmp_path / "crontab"
    path.write_text("0 2 * * * /bin/nightly\n")
    out = run_import(path)
    assert "Lines before any CRON_TZ are read in UTC (--timezone)" in out
    assert "no MAILTO: cron mails the output to the crontab's owner, a local mailbox." in out
    out = run_import(path, "--timezone", "Europe/Berlin", "--prefix", "berlin")
    assert "Lines before any CRON_TZ" not in out
    assert str(Job.objects.get(name__startswith="berlin-").crontab.timezone) == "Europe/Berlin"
    with pytest.raises(CommandError, match="--timezone: 'Mars/Base' is not a known IANA timezone."):
        run_import(path, "--timezone", "Mars/Base", "--prefix", "mars")


def test_a_file_too_large_is_refused_unread(tmp_path):
    path = tmp_path / "crontab"
    path.write_text("* * * * * /bin/true\n" * 60000)
    with pytest.raises(CommandError, match="is larger than 1,000,000 characters: split it."):
        run_import(path)
    assert not Job.objects.exists()


def test_the_jobs_are_shared_with_a_team(tmp_path):
    from django.contrib.auth.models import Group

    Group.objects.create(name="ops")
    path = tmp_path / "crontab"
    path.write_text("MAILTO=\n0 2 * * * /bin/nightly\n")
    run_import(path, "--team", "ops")
    assert Job.objects.get().group.name == "ops"
    with pytest.raises(CommandError, match=r"line 2: jobs\[0\] \(name: other-bin-nightly-[0-9a-f]+\): group: "):
        run_import(path, "--team", "nobody", "--prefix", "other")


def test_the_crontab_is_read_from_stdin(transactional_db):
    """`crontab -l | manage.py jobs import crontab -`, in a process of its own."""
    done = manage_py("jobs", "import", "crontab", "-", "--dry-run", stdin="MAILTO=\n@daily /usr/bin/backup\n")
    assert done.returncode == 0, done.stderr
    assert "    carried over: 0 0 * * * in UTC (@daily)" in done.stdout
    assert "dry run: the import is valid; nothing was saved." in done.stdout


def test_a_worker_runs_an_imported_line_as_cron_would(processes, tmp_path):
    """Its environment line, and the text after % as its standard input, through a real worker."""
    path = tmp_path / "crontab"
    path.write_text('MAILTO=""\nGREETING="hello there"\n0 0 1 1 * echo "$GREETING"; cat%first line%50\\% done\n')
    run_import(path)
    job = Job.objects.get()
    processes.worker(concurrency=1)

    run = lifecycle.create_run(job)
    wait_for(lambda: JobRun.objects.get(pk=run.pk).is_terminal, timeout=60, message="the imported line's run to end")

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output == "hello there\nfirst line\n50% done"
