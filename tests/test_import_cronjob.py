"""manage.py jobs import cronjob FILE: every field a Kubernetes CronJob maps to, what it cannot carry
over reported, and bad or huge manifests refused with nothing imported."""

from datetime import UTC, datetime
from io import StringIO
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from django.core.management import CommandError, call_command

from jobs.models import Job

pytestmark = pytest.mark.django_db

MANIFEST = """\
apiVersion: batch/v1
kind: CronJob
metadata:
  name: db-backup
  namespace: data
spec:
  schedule: "15 2 * * 1-5"
  timeZone: Europe/Berlin
  concurrencyPolicy: Forbid
  startingDeadlineSeconds: 300
  successfulJobsHistoryLimit: 3
  jobTemplate:
    spec:
      activeDeadlineSeconds: 1800
      backoffLimit: 2
      template:
        spec:
          serviceAccountName: backup
          restartPolicy: OnFailure
          volumes:
            - name: scratch
              emptyDir: {}
          containers:
            - name: backup
              image: registry.example.com/backup:1.4
              command: ["/bin/backup", "--target", "s3://bucket/db dumps"]
              args: ["--verbose"]
              workingDir: /srv
              env:
                - name: MODE
                  value: full
                - name: PASSWORD
                  valueFrom:
                    secretKeyRef: {name: db, key: password}
              resources:
                limits: {memory: 512Mi, cpu: "1"}
              volumeMounts:
                - {name: scratch, mountPath: /scratch}
---
apiVersion: v1
kind: List
items:
  - apiVersion: batch/v1
    kind: CronJob
    metadata: {name: hourly-sync}
    spec:
      schedule: "@hourly"
      concurrencyPolicy: Replace
      suspend: true
      jobTemplate:
        spec:
          template:
            spec:
              containers:
                - name: sync
                  image: sync:2
                  command: [sync-all]
  - apiVersion: batch/v1
    kind: CronJob
    metadata: {name: entrypoint-only}
    spec:
      schedule: "*/10 * * * *"
      jobTemplate:
        spec:
          template:
            spec:
              containers:
                - {name: app, image: "app:3"}
"""


def run_import(path, *args):
    out = StringIO()
    call_command("jobs", "import", "cronjob", str(path), *args, stdout=out)
    return out.getvalue()


def write(tmp_path, text):
    path = tmp_path / "cronjobs.yaml"
    path.write_text(text)
    return path


def test_every_mapped_field(tmp_path):
    out = run_import(write(tmp_path, MANIFEST))
    backup = Job.objects.select_related("crontab").get(name="data.db-backup")
    assert (backup.kind, backup.target) == ("command", "/bin/backup --target 's3://bucket/db dumps' --verbose")
    assert (backup.cron_expression, str(backup.crontab.timezone)) == ("15 2 * * 1-5", "Europe/Berlin")
    assert (backup.overlap_policy, backup.start_deadline_seconds, backup.enabled) == ("skip", 300, True)
    assert (backup.timeout_seconds, backup.max_retries) == (1800, 2)
    assert (backup.environment, backup.working_directory) == ({"MODE": "full"}, "/srv")
    after = datetime(2026, 6, 1, tzinfo=UTC)
    it = croniter("15 2 * * 1-5", after.astimezone(ZoneInfo("Europe/Berlin")))
    assert backup.upcoming_slots(10, after=after) == [it.get_next(datetime).astimezone(UTC) for _ in range(10)]

    sync = Job.objects.select_related("crontab").get(name="hourly-sync")
    assert (sync.cron_expression, str(sync.crontab.timezone), sync.target) == ("0 * * * *", "UTC", "sync-all")
    assert (sync.overlap_policy, sync.enabled, sync.max_retries) == ("replace", False, 6)
    assert not Job.objects.filter(name="entrypoint-only").exists()

    assert "line 1: CronJob data.db-backup -> job data.db-backup" in out
    for reported in (
        "    carried over: concurrencyPolicy Forbid: overlap policy skip",
        "    carried over: startingDeadlineSeconds 300: start deadline",
        "    not carried over: image registry.example.com/backup:1.4: the command runs on a worker's host, not in "
        "the image.",
        "    not carried over: resources {limits: {cpu: '1', memory: 512Mi}}",
        "    not carried over: env PASSWORD from secrets, ConfigMaps or fields: give them as secret_environment.",
        "    not carried over: volume mounts.",
        "    not carried over: volumes.",
        "    not carried over: the service account.",
        "    not carried over: successfulJobsHistoryLimit 3",
        "line 43: CronJob hourly-sync -> job hourly-sync",
        "    carried over: suspended: imported paused",
        "    carried over: backoffLimit 6: retries (Kubernetes' default)",
        "    not carried over: no timeZone: Kubernetes reads the schedule in its controller manager's zone; read in "
        "UTC.",
        "line 58: CronJob entrypoint-only: not carried over: the container gives no command: it runs its image's entrypoint "
        "(app:3)",
    ):
        assert reported in out
    assert "imported: 2 jobs created." in out


def test_running_it_again_changes_nothing(tmp_path):
    path = write(tmp_path, MANIFEST)
    run_import(path)
    before = {job.name: (job.updated_at, job.next_run_at) for job in Job.objects.all()}
    out = run_import(path)
    assert "imported: 0 jobs created." in out
    assert {job.name: (job.updated_at, job.next_run_at) for job in Job.objects.all()} == before


def test_dry_run_writes_nothing(tmp_path):
    out = run_import(write(tmp_path, MANIFEST), "--dry-run")
    assert "+ create data.db-backup" in out and "nothing was saved" in out
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: CronJob\nspec: [unclosed\n", "Cannot read the file: while parsing a flow sequence"),
        ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n", "line 1: a Deployment, not a CronJob."),
        (
            MANIFEST.replace('"15 2 * * 1-5"', '"15 25 * * *"'),
            "line 1: CronJob data.db-backup: spec.schedule: '15 25 * * *' is not a valid cron expression.",
        ),
        (
            MANIFEST.replace("timeZone: Europe/Berlin", "timeZone: Europe/Atlantis"),
            "spec.timeZone: 'Europe/Atlantis' is not a known IANA timezone.",
        ),
        (
            MANIFEST.replace("concurrencyPolicy: Forbid", "concurrencyPolicy: Never"),
            "concurrencyPolicy: 'Never' is not one of Allow, Forbid, Replace.",
        ),
        ("a: &a [1]\nb: *a\n", "the alias *a is not accepted"),
        ("", "The file holds no CronJob."),
    ],
)
def test_bad_manifests_import_nothing(tmp_path, text, message):
    with pytest.raises(CommandError, match="nothing was imported") as refused:
        run_import(write(tmp_path, text))
    assert message in str(refused.value)
    assert not Job.objects.exists()


def test_a_huge_manifest_is_bounded(tmp_path):
    huge = MANIFEST + "---\n" + "# padding\n" * 120000
    with pytest.raises(CommandError, match="larger than 1,000,000 characters"):
        run_import(write(tmp_path, huge))
    deep = "a: " + "[" * 5000 + "]" * 5000 + "\n"
    with pytest.raises(CommandError, match="values nest deeper than 100 levels"):
        run_import(write(tmp_path, deep))
    assert not Job.objects.exists()
