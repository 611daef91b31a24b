"""The nights a zone's clocks change, and what a job's DST policy does to its cron slots on them:
the job's ``dst_preview`` (its next two changes) and the notes of the slot report and "why".

zoneinfo does not list a zone's changes, so they are found by reading the zone's offset once a day
and bisecting to the second where it changed (two changes less than a day apart would be missed;
no zone has had such since 1900 but for a handful of wartime days). The slots are the schedule's
(``schedules.policy_instant``, what ``next_cron_slot`` uses), not recomputed another way.
"""

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from ..choices import DstRepeated, DstSkipped
from . import schedules

DAY = timedelta(days=1)
HORIZON_DAYS = 800  # how far ahead the preview looks for a zone's next two changes
MOST_SLOTS_SHOWN = 100  # of one change's affected slots (a gap of a whole day has up to 1,440)
SKIPPED, REPEATED = "skipped", "repeated"


@dataclass(frozen=True)
class Transition:
    """One change of a zone's clocks: at the UTC instant ``at`` the offset goes from
    ``offset_before`` to ``offset_after``; the clock reads ``local_before`` just before and
    ``local_after`` at it."""

    at: datetime
    offset_before: timedelta
    offset_after: timedelta

    @property
    def kind(self):
        return SKIPPED if self.offset_after > self.offset_before else REPEATED

    @property
    def local_before(self):
        return (self.at + self.offset_before).replace(tzinfo=None)

    @property
    def local_after(self):
        return (self.at + self.offset_after).replace(tzinfo=None)

    @property
    def walls(self):
        """[first, end) of the wall-clock times the change skips or reads twice."""
        return min(self.local_before, self.local_after), max(self.local_before, self.local_after)


def _offset(zone, instant):
    return instant.astimezone(zone).utcoffset()


def _changes(zone, start, days):
    """The changes of ``zone`` in the ``days`` days from the UTC instant ``start``."""
    found = []
    previous = _offset(zone, start)
    for day in range(1, days + 1):
        following = start + day * DAY
        offset = _offset(zone, following)
        if offset != previous:
            low, high = int((following - DAY).timestamp()), int(following.timestamp())
            while high - low > 1:
                middle = (low + high) // 2
                moved = _offset(zone, datetime.fromtimestamp(middle, UTC)) != previous
                low, high = (low, middle) if moved else (middle, high)
            found.append(Transition(datetime.fromtimestamp(high, UTC), previous, offset))
        previous = offset
    return found


@functools.lru_cache(maxsize=4096)
def _changes_of_days(zone_name, first_day, days):
    start = datetime.combine(first_day, datetime.min.time(), tzinfo=UTC)
    return tuple(_changes(ZoneInfo(zone_name), start, days))


def transitions_between(zone_name, start, end):
    """The changes of the zone in [start, end) (UTC instants)."""
    if zone_name == "UTC":
        return []
    first_day = start.astimezone(UTC).date()
    days = (end.astimezone(UTC).date() - first_day).days + 1
    return [t for t in _changes_of_days(zone_name, first_day, days) if start <= t.at < end]


def next_transitions(zone_name, after, count=2):
    """The next ``count`` changes of the zone after ``after``, within HORIZON_DAYS."""
    if zone_name == "UTC":
        return []
    return [t for t in _changes_of_days(zone_name, after.astimezone(UTC).date(), HORIZON_DAYS) if t.at > after][:count]


@dataclass(frozen=True)
class AffectedSlot:
    """A wall-clock slot of the schedule that a change skips or reads twice, and the instants it
    runs at under the policy (none: skipped; two: both occurrences)."""

    wall: datetime
    kind: str
    instants: tuple
    policy: str  # "dst_skipped=shift" and the like

    @property
    def outcome(self):
        if self.kind == SKIPPED:
            return "shifted" if self.instants else "skipped"
        return self.policy.partition("=")[2]  # first, second or both


def affected_slots(expression, zone_name, transition, skipped=DstSkipped.SHIFT, repeated=DstRepeated.FIRST):
    """The schedule's wall-clock slots that ``transition`` skips or reads twice (at most
    MOST_SLOTS_SHOWN + 1, so a caller can tell there are more), each with its instants."""
    zone = ZoneInfo(zone_name)
    first, end = transition.walls
    cursor = schedules.cron_cursor(expression, first - timedelta(minutes=1))
    found = []
    while len(found) <= MOST_SLOTS_SHOWN:
        wall = cursor.get_next(datetime)
        if wall >= end:
            break
        if transition.kind == SKIPPED:
            instant = schedules.policy_instant(wall, zone, skipped, DstRepeated.FIRST)
            found.append(AffectedSlot(wall, SKIPPED, (instant,) if instant else (), f"dst_skipped={skipped}"))
        else:
            chosen = (DstRepeated.FIRST, DstRepeated.SECOND) if repeated == DstRepeated.BOTH else (repeated,)
            instants = tuple(schedules.policy_instant(wall, zone, skipped, one) for one in chosen)
            found.append(AffectedSlot(wall, REPEATED, instants, f"dst_repeated={repeated}"))
    return found


# --- in words


def _day(moment):
    return f"{moment.day} {moment:%B}"


def _clock(instant, zone, day=None):
    """"03:30", and "03:30 on 30 March" when not on ``day``."""
    local = instant.astimezone(zone)
    text = f"{local:%H:%M}"
    if day is not None and local.date() != day:
        text += f" on {_day(local)}"
    return text


def slot_text(slot, zone, ordinary=frozenset()):
    """"02:30 on 29 March runs at 03:30", "… is skipped", "… runs twice: 02:30 CEST and 02:30 CET"."""
    head = f"{slot.wall:%H:%M} on {_day(slot.wall)}"
    if slot.kind == SKIPPED:
        if not slot.instants:
            return f"{head} is skipped (it does not exist; policy {slot.policy})"
        (at,) = slot.instants
        merged = f", together with the {_clock(at, zone)} slot (once)" if at in ordinary else ""
        return f"{head} runs at {_clock(at, zone, slot.wall.date())}{merged} (policy {slot.policy})"
    named = [f"{at.astimezone(zone):%H:%M %Z}" for at in slot.instants]
    if len(named) == 2:
        return f"{head} runs twice: {named[0]} and {named[1]} (policy {slot.policy})"
    which = "first" if slot.outcome == DstRepeated.FIRST else "second"
    return f"{head} runs once, at {named[0]} (its {which} occurrence; policy {slot.policy})"


def transition_text(transition, zone):
    before = transition.at - timedelta(seconds=1)
    names = f"{before.astimezone(zone):%Z} to {transition.at.astimezone(zone):%Z}"
    verb = "jump forward" if transition.kind == SKIPPED else "fall back"
    return (f"Clocks {verb} from {transition.local_before:%H:%M} to {transition.local_after:%H:%M} on "
            f"{_day(transition.local_before)} {transition.local_before.year} ({names})")


def _iso(moment):
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _offset_text(offset):
    minutes = int(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def preview(expression, zone_name, skipped, repeated, after, count=2):
    """The ``dst_preview`` of a cron schedule: its zone's next ``count`` changes after ``after``
    and what the policy does to each affected slot."""
    zone = ZoneInfo(zone_name)
    shown = []
    for transition in next_transitions(zone_name, after, count):
        slots = affected_slots(expression, zone_name, transition, skipped, repeated)
        more = len(slots) > MOST_SLOTS_SHOWN
        slots = slots[:MOST_SLOTS_SHOWN]
        ordinary = _ordinary_slots(expression, zone_name, transition, slots, skipped, repeated)
        shown.append({
            "kind": transition.kind,
            "at": _iso(transition.at),
            "local_before": transition.local_before.isoformat(),
            "local_after": transition.local_after.isoformat(),
            "offset_before": _offset_text(transition.offset_before),
            "offset_after": _offset_text(transition.offset_after),
            "description": transition_text(transition, zone),
            "slots": [{"wall": slot.wall.isoformat(), "outcome": slot.outcome,
                       "runs_at": [_iso(at) for at in slot.instants], "text": slot_text(slot, zone, ordinary)}
                      for slot in slots],
            "more_slots": more,
        })
    return {"timezone": zone_name, "dst_skipped": skipped, "dst_repeated": repeated, "transitions": shown}


def _ordinary_slots(expression, zone_name, transition, slots, skipped, repeated):
    """The schedule's own slots at the instants shifted slots move to: a shifted slot that lands on
    one is one slot, run once."""
    if transition.kind != SKIPPED or not any(slot.instants for slot in slots):
        return frozenset()
    end = transition.walls[1]
    zone = ZoneInfo(zone_name)
    cursor = schedules.cron_cursor(expression, end - timedelta(minutes=1))
    last = max(at for slot in slots for at in slot.instants)
    ordinary = set()
    while True:
        wall = cursor.get_next(datetime)
        at = schedules.policy_instant(wall, zone, skipped, repeated if repeated != DstRepeated.BOTH else DstRepeated.FIRST)
        if at is None or at > last:
            break
        ordinary.add(at)
    return frozenset(ordinary)


def report_notes(expression, zone_name, skipped, repeated, start, end):
    """For the slot report of [start, end): ({slot instant: note} of the slots a change moved or
    that a repeated wall time made, [(instant, reason)] of the slots the policy skipped, at the
    instant the gap shifted them to)."""
    notes, skipped_slots = {}, []
    zone = ZoneInfo(zone_name)
    for transition in transitions_between(zone_name, start - DAY, end + DAY):
        for slot in affected_slots(expression, zone_name, transition, skipped, repeated):
            if slot.kind == SKIPPED:
                if slot.instants:
                    (at,) = slot.instants
                    if start <= at < end:
                        notes.setdefault(at, f"moved from {slot.wall:%H:%M} to {_clock(at, zone, slot.wall.date())} "
                                             f"by the DST gap (policy {slot.policy})")
                else:
                    at = schedules.wall_instant(slot.wall, zone)
                    if start <= at < end:
                        skipped_slots.append((at, f"DST gap: {slot.wall:%H:%M} on {slot.wall:%Y-%m-%d} does not "
                                                  f"exist in {zone_name} (policy {slot.policy})"))
                continue
            for number, at in enumerate(slot.instants):
                if start <= at < end:
                    which = ("first", "second")[number] if len(slot.instants) == 2 else slot.outcome
                    notes.setdefault(at, f"{slot.wall:%H:%M} comes twice on {slot.wall:%Y-%m-%d}: this is its {which} "
                                         f"occurrence, {at.astimezone(zone):%H:%M %Z} (policy {slot.policy})")
    return notes, skipped_slots
