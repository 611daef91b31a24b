"""Jobs from Kubernetes CronJob manifests (``manage.py jobs import cronjob FILE``): one or more YAML
documents, each a CronJob or a List of them (``kubectl get cronjobs -o yaml``). Each CronJob is a
command job named by its namespace and ``metadata.name``:

| CronJob | job |
|---|---|
| ``schedule`` (five fields, ``@daily`` and the like), ``timeZone`` | a cron schedule in that zone |
| ``concurrencyPolicy`` Allow, Forbid, Replace | ``overlap_policy`` allow, skip, replace |
| ``startingDeadlineSeconds`` | ``start_deadline_seconds`` |
| ``suspend`` | ``enabled`` (the other way round) |
| the one container's ``command`` and ``args`` | the command (``target``), words quoted for the shell |
| its ``env`` values, ``workingDir`` | ``environment``, ``working_directory`` |
| the Job's ``activeDeadlineSeconds``, ``backoffLimit`` (6 when not given) | ``timeout_seconds``, ``max_retries`` |

What a worker's command cannot have (the image, resources, volumes, values from secrets) is
reported. The file is read with the jobs files' YAML reader's limits (no aliases, a bounded depth).
"""

import shlex

import yaml
from django.core.exceptions import ValidationError

from ...timing import schedules
from .. import files
from . import Import, Row
from .crontab import NICKNAMES

TAG = "cronjob"
OVERLAP = {"Allow": "allow", "Forbid": "skip", "Replace": "replace"}
KUBERNETES_BACKOFF_LIMIT = 6
# What a pod has and a command on a worker does not, by the key that gives it.
POD_ONLY = {
    "volumes": "volumes",
    "serviceAccountName": "the service account",
    "nodeSelector": "the node selector",
    "affinity": "affinity",
    "tolerations": "tolerations",
    "initContainers": "init containers",
    "imagePullSecrets": "image pull secrets",
    "securityContext": "the pod's security context",
}
CONTAINER_ONLY = {
    "volumeMounts": "volume mounts",
    "envFrom": "envFrom (whole ConfigMaps and Secrets)",
    "ports": "ports",
    "securityContext": "the container's security context",
}


def read(text):
    imported = Import()
    for document, node in documents(text):
        if document is None:
            continue
        items = document.get("items") if isinstance(document, dict) and document.get("kind") == "List" else None
        found = (
            zip(items, item_lines(node, len(items)), strict=True)
            if isinstance(items, list)
            else [(document, line_of(node))]
        )
        for item, line in found:
            kind = item.get("kind") if isinstance(item, dict) else type(item).__name__
            if kind != "CronJob":
                imported.errors.append(f"line {line}: a {kind or 'document without kind'}, not a CronJob.")
                continue
            entry = entry_of(item, line, imported)
            if entry is not None:
                imported.add("jobs", entry, line)
    if not imported.rows and not imported.errors:
        imported.errors.append("The file holds no CronJob.")
    imported.keep_existing()
    return imported


def documents(text):
    """(document, its node) of each YAML document, after the jobs files' checks of aliases and depth."""
    files.check_yaml(text)
    loader = files.YAML_LOADER(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            yield loader.construct_document(node), node
    except yaml.YAMLError as exc:
        raise files.JobFileError([f"Cannot read the manifest: {exc}"]) from None
    finally:
        loader.dispose()


def line_of(node):
    return node.start_mark.line + 1


def item_lines(node, count):
    """The first line of each item of a List document."""
    for key, value in node.value:
        if key.value == "items" and isinstance(value, yaml.SequenceNode):
            return [line_of(item) for item in value.value]
    return [line_of(node)] * count


def mapping(value):
    return value if isinstance(value, dict) else {}


def entry_of(cronjob, line, imported):
    metadata, spec = mapping(cronjob.get("metadata")), mapping(cronjob.get("spec"))
    name = metadata.get("name")
    name = f"{metadata['namespace']}.{name}" if metadata.get("namespace") and name else name
    row = Row(f"line {line}: CronJob {name}", job=name)
    imported.rows.append(row)
    errors = []
    if not isinstance(name, str) or not name:
        errors.append("metadata.name: the CronJob has no name.")
    job_spec = mapping(mapping(spec.get("jobTemplate")).get("spec"))
    pod = mapping(mapping(job_spec.get("template")).get("spec"))
    schedule = schedule_of(spec, row, errors)
    command = command_of(pod, row, errors)
    if errors or schedule is None or command is None:
        imported.errors += [f"line {line}: CronJob {name}: {error}" for error in errors]
        return None
    entry = {
        "name": name,
        "kind": "command",
        "target": command,
        "schedule": schedule,
        "tags": [TAG],
        "description": f"Kubernetes CronJob {name}",
    }
    policy = spec.get("concurrencyPolicy", "Allow")
    if policy not in OVERLAP:
        imported.errors.append(
            f"line {line}: CronJob {name}: concurrencyPolicy: {policy!r} is not one of {', '.join(OVERLAP)}."
        )
        return None
    entry["overlap_policy"] = OVERLAP[policy]
    row.carried.append(f"concurrencyPolicy {policy}: overlap policy {OVERLAP[policy]}")
    for key, field in (("startingDeadlineSeconds", "start_deadline_seconds"),):
        if key in spec:
            entry[field] = spec[key]
            row.carried.append(f"{key} {spec[key]}: start deadline")
    entry["enabled"] = not spec.get("suspend", False)
    if spec.get("suspend"):
        row.carried.append("suspended: imported paused")
    if "activeDeadlineSeconds" in job_spec:
        entry["timeout_seconds"] = job_spec["activeDeadlineSeconds"]
        row.carried.append(f"activeDeadlineSeconds {job_spec['activeDeadlineSeconds']}: timeout")
    retries = job_spec.get("backoffLimit", KUBERNETES_BACKOFF_LIMIT)
    entry["max_retries"] = retries
    row.carried.append(
        f"backoffLimit {retries}: retries" + ("" if "backoffLimit" in job_spec else " (Kubernetes' default)")
    )
    container = pod["containers"][0]
    environment(container, entry, row)
    if container.get("workingDir"):
        entry["working_directory"] = container["workingDir"]
        row.carried.append(f"workingDir {container['workingDir']}")
    lost(spec, pod, container, row)
    return entry


def schedule_of(spec, row, errors):
    given = spec.get("schedule")
    if not isinstance(given, str) or not given.strip():
        errors.append("spec.schedule: the CronJob has no schedule.")
        return None
    zone, cron = spec.get("timeZone"), given.strip()
    if cron.startswith(("CRON_TZ=", "TZ=")):  # Kubernetes before 1.27 read a zone given this way
        prefix, _, cron = cron.partition(" ")
        zone = zone or prefix.partition("=")[2]
        cron = cron.strip()
    cron = NICKNAMES.get(cron, cron)
    for check, value, key in (
        (schedules.validate_cron, cron, "schedule"),
        (schedules.validate_timezone, zone or "UTC", "timeZone"),
    ):
        try:
            check(value)
        except ValidationError as exc:
            errors.append(f"spec.{key}: {' '.join(exc.messages)}")
            return None
    if zone:
        row.carried.append(f"schedule {given} in {zone}")
    else:
        row.carried.append(f"schedule {given}")
        row.lost.append("no timeZone: Kubernetes reads the schedule in its controller manager's zone; read in UTC.")
    return {"type": "cron", "cron": cron, "timezone": zone or "UTC"}


def command_of(pod, row, errors):
    containers = pod.get("containers")
    if not isinstance(containers, list) or not containers or not all(isinstance(c, dict) for c in containers):
        errors.append("spec.jobTemplate.spec.template.spec.containers: the CronJob has no container.")
        return None
    if len(containers) > 1:
        row.refused = (
            f"{len(containers)} containers ({', '.join(str(c.get('name')) for c in containers)}): a "
            "command job runs one command."
        )
        return None
    container = containers[0]
    words = [*(container.get("command") or []), *(container.get("args") or [])]
    if not container.get("command"):
        row.refused = (
            f"the container gives no command: it runs its image's entrypoint ({container.get('image')}), "
            "which is not known here. Add the command to the manifest and import it again."
        )
        return None
    if not all(isinstance(word, str | int | float) for word in words):
        errors.append("the container's command and args must be lists of strings.")
        return None
    words = [str(word) for word in words]
    row.carried.append(f"command {shlex.join(words)}")
    if any("$(" in word for word in words):
        row.lost.append("$(NAME) in the command is Kubernetes' own expansion; the shell reads it as a command.")
    return shlex.join(words)


def environment(container, entry, row):
    values, lost = {}, []
    for variable in container.get("env") or []:
        if not isinstance(variable, dict) or "name" not in variable:
            continue
        if "valueFrom" in variable:
            lost.append(variable["name"])
        else:
            values[str(variable["name"])] = str(variable.get("value", ""))
    if values:
        entry["environment"] = values
        row.carried.append(f"env {', '.join(values)}")
    if lost:
        row.lost.append(f"env {', '.join(lost)} from secrets, ConfigMaps or fields: give them as secret_environment.")


def lost(spec, pod, container, row):
    if container.get("image"):
        row.lost.append(f"image {container['image']}: the command runs on a worker's host, not in the image.")
    if resources := container.get("resources"):
        row.lost.append(
            f"resources {shown(resources)}: see the job's memory_limit_mb, cpu_limit_seconds and max_processes."
        )
    for key, what in CONTAINER_ONLY.items():
        if container.get(key):
            row.lost.append(f"{what}.")
    for key, what in POD_ONLY.items():
        if pod.get(key):
            row.lost.append(f"{what}.")
    for key in ("successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        if key in spec:
            row.lost.append(f"{key} {spec[key]}: runs are kept as retention_days and retention_min_runs say.")


def shown(value):
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
