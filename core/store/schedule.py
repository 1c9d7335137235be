"""Schedules for cron jobs: parse what a user types, compute fire times, decide catch-up.

A schedule is stored in a canonical form:

* ``cron M H DOM MON DOW`` — a 5-field cron expression (fire times from croniter),
* ``every N`` — every N seconds, counted from the job's creation,
* ``at ISO`` — once, at an aware ISO timestamp.

What users type (``every 2h``, ``daily at 09:00``, ``weekdays at 9am``, ``in 30m``, an ISO
timestamp, or 5 cron fields) is turned into one of those by :func:`parse_schedule`. Cron
expressions are evaluated in the job's time zone, so "daily at 09:00" stays 09:00 across
daylight-saving changes.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = [
    "Schedule",
    "ScheduleError",
    "Slots",
    "due_slots",
    "fmt_time",
    "local_zone",
    "next_fire",
    "parse_schedule",
    "zone",
]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"^(\d+)\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hr|hrs|hours?|d|days?|w|weeks?)$")
_CLOCK = re.compile(r"^(\d{1,2})(?::(\d{2}))?\s*(am|pm)?$")
_DAYS = {"mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6, "sun": 0}
# More catch-up work than this per job is never done: the loop that walks missed slots stops.
_MAX_WALK = 100_000


class ScheduleError(ValueError):
    """A schedule that cannot be understood; the message lists the forms that can."""


@dataclass(frozen=True, slots=True)
class Schedule:
    """A parsed schedule in canonical form (see the module docstring)."""

    kind: str  # "cron" | "every" | "at"
    value: str  # the cron fields, the seconds, or the ISO timestamp

    @property
    def text(self) -> str:
        return f"{self.kind} {self.value}"

    @classmethod
    def from_text(cls, text: str) -> Schedule:
        kind, _, value = text.partition(" ")
        if kind not in ("cron", "every", "at") or not value:
            raise ScheduleError(f"not a stored schedule: {text!r}")
        return cls(kind, value)

    def describe(self) -> str:
        if self.kind == "every":
            return f"every {_human_seconds(int(self.value))}"
        if self.kind == "at":
            return f"once at {self.value}"
        return f"cron '{self.value}'"


HELP = (
    "Schedules: 5-field cron ('0 9 * * 1-5'), 'every 2h', 'every 30m', 'daily at 09:00', "
    "'weekdays at 9am', 'mon at 8:30', 'in 30m', or an ISO timestamp ('2026-05-01T09:00')."
)


def zone(name: str | None) -> ZoneInfo | None:
    """The time zone called ``name`` (None: the system's); raises ScheduleError when unknown."""
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(f"unknown time zone {name!r}; use an IANA name such as 'Europe/Paris'") from None


def local_zone() -> str:
    """The system's IANA zone name ($TZ, else where /etc/localtime points), or "UTC".

    A name, not an offset: schedules must follow the zone's daylight-saving rules.
    """
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        target = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    except OSError:
        pass
    for name in candidates:
        if name:
            try:
                ZoneInfo(name)
                return name
            except (ZoneInfoNotFoundError, ValueError):
                continue
    return "UTC"


def parse_schedule(text: str, *, now: float | None = None, tz: str | None = None) -> Schedule:
    """Turn what a user typed into a canonical schedule. ``in 30m`` becomes ``at`` (now + 30m)."""
    now = time.time() if now is None else now
    raw = " ".join(text.strip().split())
    lowered = raw.lower()
    if not raw:
        raise ScheduleError("the schedule is empty. " + HELP)
    if lowered.startswith("every "):
        return Schedule("every", str(_duration(lowered[6:])))
    if lowered.startswith("in "):
        when = datetime.fromtimestamp(now + _duration(lowered[3:]), zone(tz)).astimezone(zone(tz))
        return Schedule("at", when.isoformat(timespec="seconds"))
    for prefix, dow in (("daily at ", "*"), ("every day at ", "*"), ("weekdays at ", "1-5"), ("weekends at ", "0,6")):
        if lowered.startswith(prefix):
            hour, minute = _clock(lowered[len(prefix) :])
            return Schedule("cron", f"{minute} {hour} * * {dow}")
    day, _, rest = lowered.partition(" at ")
    if rest and day[:3] in _DAYS and len(day) >= 3:
        hour, minute = _clock(rest)
        return Schedule("cron", f"{minute} {hour} * * {_DAYS[day[:3]]}")
    if lowered == "hourly":
        return Schedule("cron", "0 * * * *")
    fields = raw.split(" ")
    if len(fields) == 5:
        from croniter import croniter

        if not croniter.is_valid(raw):
            raise ScheduleError(f"{raw!r} is not a valid cron expression. " + HELP)
        return Schedule("cron", raw)
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise ScheduleError(f"cannot understand the schedule {raw!r}. " + HELP) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=zone(tz)) if tz else when.astimezone()
    return Schedule("at", when.isoformat(timespec="seconds"))


def next_fire(schedule: Schedule, after: float, *, anchor: float, tz: str | None) -> float | None:
    """The first fire time strictly after ``after`` (epoch seconds); None when it never fires again."""
    if schedule.kind == "at":
        at = datetime.fromisoformat(schedule.value).timestamp()
        return at if at > after else None
    if schedule.kind == "every":
        step = int(schedule.value)
        if after < anchor + step:
            return anchor + step
        return anchor + (int((after - anchor) // step) + 1) * step
    from croniter import croniter

    start = datetime.fromtimestamp(after, zone(tz)).astimezone(zone(tz))
    return float(croniter(schedule.value, start).get_next(float))


@dataclass(frozen=True, slots=True)
class Slots:
    """What to do about a job whose next fire time has passed."""

    run_at: float | None  # the slot to run now (the latest one due), or None when it is too old
    missed: int  # due slots that will not run (older than the latest, or all when past the grace)
    next_at: float | None  # the job's next fire time after ``now``


def due_slots(schedule: Schedule, next_at: float, now: float, *, anchor: float, tz: str | None, grace: float) -> Slots:
    """Catch-up policy: of every slot due in ``[next_at, now]``, run only the latest, and only
    when it is at most ``grace`` seconds old; the rest are counted as missed (never a storm)."""
    latest = next_at
    missed = 0
    cursor = next_fire(schedule, latest, anchor=anchor, tz=tz)
    walked = 0
    while cursor is not None and cursor <= now and walked < _MAX_WALK:
        latest, missed, walked = cursor, missed + 1, walked + 1
        cursor = next_fire(schedule, latest, anchor=anchor, tz=tz)
    following = cursor if cursor is not None and cursor > now else next_fire(schedule, now, anchor=anchor, tz=tz)
    if now - latest > grace:
        return Slots(None, missed + 1, following)
    return Slots(latest, missed, following)


def _duration(text: str) -> int:
    match = _DURATION.match(text.strip())
    if not match or int(match.group(1)) <= 0:
        raise ScheduleError(f"cannot understand the duration {text!r}; write it like 30m, 2h, 1d. " + HELP)
    return int(match.group(1)) * _UNITS[match.group(2)[0]]


def _clock(text: str) -> tuple[int, int]:
    match = _CLOCK.match(text.strip())
    if not match:
        raise ScheduleError(f"cannot understand the time {text!r}; write it like 09:00 or 9am. " + HELP)
    hour, minute, half = int(match.group(1)), int(match.group(2) or 0), match.group(3)
    if half == "pm" and hour < 12:
        hour += 12
    if half == "am" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59:
        raise ScheduleError(f"{text!r} is not a time of day")
    return hour, minute


def _human_seconds(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def fmt_time(epoch: float | None, tz: str | None = None) -> str:
    """A timestamp for people, in the job's zone."""
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, zone(tz)).strftime("%Y-%m-%d %H:%M %Z").strip()
