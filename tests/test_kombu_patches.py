"""The kombu work-around (scheduler_site/kombu_patches.py) applies to the kombu it was written for
and to no other: with another version the process says so at start and runs kombu as it is."""

import kombu
from kombu.transport import redis as kombu_redis

from scheduler_site import kombu_patches


def test_it_is_applied_to_the_pinned_kombu():
    assert kombu.__version__ == kombu_patches.PINNED  # requirements.txt pins it: a bump comes here first
    assert kombu_patches.install()
    assert kombu_redis.QoS.restore_unacked.skips_when_disconnected


def test_with_another_kombu_it_says_so_and_patches_nothing(capsys, monkeypatch):
    original = kombu_redis.QoS.restore_unacked.__wrapped__
    monkeypatch.setattr(kombu_redis.QoS, "restore_unacked", original)

    assert not kombu_patches.install(version="5.8.0")

    assert kombu_redis.QoS.restore_unacked is original
    said = capsys.readouterr().err
    assert "written for kombu 5.7.0, found kombu 5.8.0: not applied" in said
    assert "chaos test 7b" in said
