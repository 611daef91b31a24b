"""Celery's remote control, unanswered unless an operator turns it on (``JOBS_REMOTE_CONTROL``, from
``CELERY_WORKER_ENABLE_REMOTE_CONTROL``).

The worker keeps its mailbox consumer (Celery's ``worker_enable_remote_control`` stays on) and drops
every command that reaches it, without a reply: no ``inspect``, ``revoke``, time limit or
``shutdown`` from whoever reaches the broker. Turning Celery's switch off instead removed the
mailbox's consumer, and with it the only connection a busy Redis worker watches: with every pool
process busy (prefetch 1) the tasks' queue is not read, so a broker that went away meanwhile went
unnoticed, and the worker never consumed again (``tests/chaos/test_broker_faults.py``).
"""

import logging

from celery.worker import pidbox

logger = logging.getLogger(__name__)

_answer = pidbox.Pidbox.on_message


_told = set()  # the commands a warning was logged for (Flower asks for events every 5 s: said once)


def _unanswered(self, body, message):
    method = str(body.get("method") if isinstance(body, dict) else None)[:50]
    say = logger.warning if method not in _told and len(_told) < 100 else logger.debug
    _told.add(method)
    say("Dropped a remote control command (%s): CELERY_WORKER_ENABLE_REMOTE_CONTROL is off", method)


def install(answer):
    """Answer Celery's remote control (``answer``) or drop every command (the default)."""
    pidbox.Pidbox.on_message = _answer if answer else _unanswered
