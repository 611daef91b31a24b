"""The locks pin everything the requirements name, with hashes, and agree with each other
(scripts/lock.sh makes them; scripts/quickstart.sh and scripts/test.sh install them with
--require-hashes, which refuses any package that is not in the lock with a matching hash)."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PIN = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^\s;\\]+)")


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(path):
    """{name: version} of the pins in a requirements file, following its -r lines."""
    pins = {}
    for line in (REPO / path).read_text().splitlines():
        line = line.strip()
        if line.startswith("-r "):
            pins.update(requirements(line[3:].strip()))
        elif match := PIN.match(line):
            pins[canonical(match[1])] = match[2]
    return pins


def lock(path):
    """{name: (version, hashes)} of a pip-compile lock."""
    entries, current = {}, None
    for line in (REPO / path).read_text().splitlines():
        if match := PIN.match(line):
            current = canonical(match[1])
            entries[current] = (match[2], [])
        elif current and (hashed := re.search(r"--hash=sha256:([0-9a-f]{64})", line)):
            entries[current][1].append(hashed[1])
        elif not line.startswith(" "):
            current = None
    return entries


def test_every_requirement_is_in_its_lock_at_the_same_version():
    for wanted, locked in (("requirements.txt", "requirements.lock"), ("requirements-dev.txt", "requirements-dev.lock")):
        entries = lock(locked)
        for name, version in requirements(wanted).items():
            assert name in entries, f"{name} ({wanted}) is missing from {locked}: run scripts/lock.sh"
            assert entries[name][0] == version, f"{name}: {wanted} says {version}, {locked} {entries[name][0]}"


def test_every_locked_package_has_a_hash():
    for locked in ("requirements.lock", "requirements-dev.lock"):
        entries = lock(locked)
        assert len(entries) > len(requirements(locked.replace(".lock", ".txt")))  # the transitive ones too
        assert [name for name, (_, hashes) in entries.items() if not hashes] == []


def test_the_service_lock_and_the_test_lock_agree():
    service, tests = lock("requirements.lock"), lock("requirements-dev.lock")
    assert {name: version for name, (version, _) in service.items() if tests.get(name, (version,))[0] != version} == {}
    assert sorted(set(service) - set(tests)) == []


def test_the_scripts_install_from_the_locks_with_hashes():
    assert "--require-hashes -r requirements.lock" in (REPO / "scripts/quickstart.sh").read_text()
    assert "--require-hashes -r requirements-dev.lock" in (REPO / "scripts/test.sh").read_text()
