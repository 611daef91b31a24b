"""Work the scheduler leader does besides dispatching jobs, registered by the apps that own it.

The scheduler does not import the apps built on jobs (workflows, notifications); each registers
its periodic work here when Django starts (its ``AppConfig.ready``), and the leader runs it:
``every="wakeup"`` with each dispatch of due jobs, ``"tick"`` once per JOBS_TICK_SECONDS,
``"monitor"`` once per JOBS_MONITOR_SECONDS. A duty that fails is logged; the others still run.
"""

import logging

logger = logging.getLogger(__name__)

CADENCES = ("wakeup", "tick", "monitor")
_duties = {cadence: {} for cadence in CADENCES}


def register(name, duty, every):
    if every not in CADENCES:
        raise ValueError(f"every must be one of {', '.join(CADENCES)}")
    for duties in _duties.values():
        duties.pop(name, None)
    _duties[every][name] = duty


def run(every):
    for name, duty in list(_duties[every].items()):
        try:
            duty()
        except Exception:
            logger.exception("scheduler duty %s failed; it runs again next time", name)
