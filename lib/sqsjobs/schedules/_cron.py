"""AWS's schedule expressions, parsed and checked in one place: ``cron(...)``, ``rate(...)``, ``at(...)``.

EventBridge (rules and Scheduler) speaks one dialect; every part of sqsjobs that reads it goes
through :func:`parse`: the period of a scheduled job (``schedules._periodic``), the due time of a
delayed job's one-time schedule (``enqueue._delays``) and the local cloud's firing
(``local.schedules``). No kept library covers the whole dialect with time zones and ``rate``/``at``,
so this module is written by hand (stdlib and ``zoneinfo`` only; nothing runs at import).

``cron(minutes hours day-of-month month day-of-week year)``::

    field          values                  wildcards
    minutes        0-59                    , - * /
    hours          0-23                    , - * /
    day-of-month   1-31                    , - * / ?   L  L-n  nW  LW
    month          1-12 or JAN-DEC         , - * /
    day-of-week    1-7 or SUN-SAT (1=SUN)  , - * ?     L  nL  n#k
    year           1970-2199               , - * /

One of day-of-month and day-of-week is ``?`` and the other is not. ``L``, ``L-n``, ``nW``, ``LW``,
``nL`` and ``n#k`` stand alone in their field. A range may wrap (``FRI-MON``, ``22-2``) except in
the year. ``nW`` is the weekday nearest day ``n`` within the month; a month without day ``n``
has none (as it has no day ``31`` in February).

``rate(value unit)``: a positive whole number of ``minute``/``minutes``, ``hour``/``hours`` or
``day``/``days`` (singular exactly when the value is 1), counted from the schedule's start as
durations: a day is 24 hours whatever the clock does.

``at(yyyy-mm-ddThh:mm:ss)``: once, at that wall-clock time of the schedule's time zone.

Time zones follow EventBridge Scheduler's daylight-saving rule (its user guide, "Daylight saving
time"): a local time the clock skips in spring does not fire that day, and a local time the clock
passes twice in autumn fires once, on its first pass.

Example:
    >>> from datetime import UTC, datetime
    >>> nightly = parse("cron(30 2 * * ? *)")
    >>> nightly.next_after(datetime(2026, 3, 7, 12, 0, tzinfo=UTC), "America/New_York").isoformat()
    '2026-03-09T06:30:00+00:00'
    >>> parse("cron(0 9 ? * 2#1 *)").next_after(datetime(2026, 1, 1, tzinfo=UTC)).date().isoformat()
    '2026-01-05'
    >>> parse("rate(1 hour)").interval_seconds
    3600
    >>> parse("cron(0 18 * * MON-FRI *)")
    Traceback (most recent call last):
    ...
    sqsjobs.ConfigurationError: schedule 'cron(0 18 * * MON-FRI *)': day-of-month and day-of-week cannot both \
be given; make one of them ? (e.g. cron(0 18 ? * MON-FRI *))
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from enum import StrEnum

from sqsjobs._errors import ConfigurationError

__all__ = ["At", "Cron", "Kind", "Rate", "RateUnit", "ScheduleExpression", "parse", "zone"]

MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
FIRST_YEAR, LAST_YEAR = 1970, 2199

_OUTER = re.compile(r"^\s*(cron|rate|at)\((.*)\)\s*$", re.IGNORECASE | re.DOTALL)
_RATE = re.compile(r"^\s*(\d+)\s+([a-z]+)\s*$", re.IGNORECASE)
_AT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86_400}


class Kind(StrEnum):
    """The three kinds of schedule expression."""

    CRON = "cron"
    RATE = "rate"
    AT = "at"


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    cyclic: bool = True
    steps: bool = True


_MINUTES = _Field("minutes", 0, 59)
_HOURS = _Field("hours", 0, 23)
_DAYS_OF_MONTH = _Field("day-of-month", 1, 31)
_MONTHS = _Field("month", 1, 12, MONTHS)
_DAYS_OF_WEEK = _Field("day-of-week", 1, 7, WEEKDAYS, steps=False)  # AWS lists no / for it
_YEARS = _Field("year", FIRST_YEAR, LAST_YEAR, cyclic=False)

#: the days of one month a day rule selects: (year, month) -> sorted days
DayRule = Callable[[int, int], list[int]]


@dataclass(frozen=True)
class Cron:
    """A parsed ``cron(...)``: the values of each field, and the rule that picks the days of a month."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: tuple[int, ...]
    years: tuple[int, ...]
    days: DayRule

    def local_times(self, start: datetime) -> Iterator[datetime]:
        """Every naive wall-clock minute this cron names, from ``start`` (naive) on, in order."""
        for year in self.years:
            if year < start.year:
                continue
            for month in self.months:
                if (year, month) < (start.year, start.month):
                    continue
                for day in self.days(year, month):
                    if (year, month, day) < (start.year, start.month, start.day):
                        continue
                    for hour in self.hours:
                        for minute in self.minutes:
                            moment = datetime(year, month, day, hour, minute)
                            if moment >= start:
                                yield moment

    def names(self, moment: datetime) -> bool:
        """True when the naive wall-clock minute of ``moment`` is one of this cron's."""
        return (moment.minute in self.minutes and moment.hour in self.hours and moment.month in self.months
                and moment.year in self.years and moment.day in self.days(moment.year, moment.month))


class RateUnit(StrEnum):
    """The units ``rate(...)`` takes."""

    MINUTE = "minute"
    HOUR = "hour"
    DAY = "day"


@dataclass(frozen=True)
class Rate:
    """A parsed ``rate(value unit)``."""

    value: int
    unit: RateUnit

    @property
    def seconds(self) -> int:
        """The interval in seconds."""
        return self.value * _UNIT_SECONDS[self.unit]


@dataclass(frozen=True)
class At:
    """A parsed ``at(...)``: the naive wall-clock time of the schedule's time zone."""

    when: datetime


@dataclass(frozen=True)
class ScheduleExpression:
    """One checked schedule expression; ``next_after`` and ``fires_at`` answer when it fires."""

    text: str
    kind: Kind
    cron: Cron | None = None
    rate: Rate | None = None
    at: At | None = None

    @property
    def interval_seconds(self) -> int:
        """A rate's interval (0 for cron and at)."""
        return self.rate.seconds if self.rate is not None else 0

    def next_after(self, after: datetime, timezone: str | tzinfo = "UTC", *,
                   start: datetime | None = None) -> datetime | None:
        """The first time (aware, UTC) strictly after ``after`` that the schedule fires; None: never again.

        ``timezone`` is the schedule's ``ScheduleExpressionTimezone``; a rate counts from ``start``
        (default: ``after``, so its first fire is one interval later).

        Example:
            >>> from datetime import UTC, datetime
            >>> parse("rate(5 minutes)").next_after(datetime(2026, 1, 1, 0, 7, tzinfo=UTC),
            ...                                     start=datetime(2026, 1, 1, tzinfo=UTC)).time().isoformat()
            '00:10:00'
            >>> parse("at(2026-01-01T02:00:00)").next_after(datetime(2026, 1, 1, 3, tzinfo=UTC)) is None
            True
        """
        after = _aware(after)
        if self.rate is not None:
            origin = _aware(start) if start is not None else after
            interval = timedelta(seconds=self.rate.seconds)
            if after < origin:
                return origin.astimezone(UTC)
            steps = (after - origin) // interval + 1
            return (origin + steps * interval).astimezone(UTC)
        tz = zone(timezone)
        if self.at is not None:
            due = self.at.when.replace(tzinfo=tz).astimezone(UTC)
            return due if due > after else None
        assert self.cron is not None
        local = after.astimezone(tz).replace(tzinfo=None, second=0, microsecond=0)
        for candidate in self.cron.local_times(local):
            if not _exists(candidate, tz):
                continue  # spring forward: a skipped wall-clock time does not fire
            moment = candidate.replace(tzinfo=tz).astimezone(UTC)  # fold 0: a repeated time fires on its first pass
            if moment > after:
                return moment
        return None

    def next_times(self, after: datetime, count: int, timezone: str | tzinfo = "UTC", *,
                   start: datetime | None = None) -> list[datetime]:
        """Up to ``count`` fire times after ``after`` (UTC), in order.

        Example:
            >>> from datetime import UTC, datetime
            >>> [t.day for t in parse("cron(0 10 L * ? *)").next_times(datetime(2026, 1, 1, tzinfo=UTC), 3)]
            [31, 28, 31]
        """
        found: list[datetime] = []
        moment: datetime | None = _aware(after)
        origin = start if start is not None else moment
        while len(found) < count and moment is not None:
            moment = self.next_after(moment, timezone, start=origin)
            if moment is not None:
                found.append(moment)
        return found

    def fires_at(self, minute: datetime, timezone: str | tzinfo = "UTC") -> bool:
        """True when a cron or at expression fires in the minute of ``minute`` (an aware instant).

        Example:
            >>> from datetime import UTC, datetime
            >>> parse("cron(15 9 ? * MON-FRI *)").fires_at(datetime(2026, 1, 5, 9, 15, 30, tzinfo=UTC))
            True
        """
        floor = _aware(minute).replace(second=0, microsecond=0)
        return self.next_after(floor - timedelta(microseconds=1), timezone) == floor


def parse(expression: str) -> ScheduleExpression:
    """Check ``expression`` and return it parsed; a ``ConfigurationError`` saying what is wrong otherwise.

    Example:
        >>> parse("cron(0/15 * * * ? *)").cron.minutes
        (0, 15, 30, 45)
        >>> parse("rate(1 hours)")
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: schedule 'rate(1 hours)': a rate of 1 takes a singular unit: rate(1 hour)
    """
    if not isinstance(expression, str):
        raise ConfigurationError(f"schedule {expression!r} is not text: use cron(...), rate(...) or at(...)")
    outer = _OUTER.match(expression)
    if outer is None:
        raise ConfigurationError(
            f"schedule {expression!r} is not an EventBridge expression: use cron(...), rate(...) or at(...)")
    kind, body = Kind(outer.group(1).lower()), outer.group(2)
    text = expression.strip()
    try:
        if kind is Kind.RATE:
            return ScheduleExpression(text=text, kind=kind, rate=_rate(body))
        if kind is Kind.AT:
            return ScheduleExpression(text=text, kind=kind, at=_at(body))
        return ScheduleExpression(text=text, kind=kind, cron=_cron(body))
    except _Invalid as problem:
        raise ConfigurationError(f"schedule {expression!r}: {problem}") from None


def zone(timezone: str | tzinfo) -> tzinfo:
    """``timezone`` as a ``tzinfo`` (UTC without reading the time zone database); a bad name is refused.

    Example:
        >>> zone("UTC") is UTC, str(zone("Europe/Paris"))
        (True, 'Europe/Paris')
    """
    if isinstance(timezone, tzinfo):
        return timezone
    if timezone in ("", "UTC", "Etc/UTC"):
        return UTC
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigurationError(f"time zone {timezone!r} is not an IANA name such as 'Europe/Paris'") from None


# ---------------------------------------------------------------- parsing


class _Invalid(Exception):
    """What is wrong with one part of an expression (turned into a ConfigurationError by ``parse``)."""


def _rate(body: str) -> Rate:
    match = _RATE.match(body)
    if match is None:
        raise _Invalid("expected rate(value unit), e.g. rate(5 minutes)")
    value, word = int(match.group(1)), match.group(2).lower()
    unit = word[:-1] if word.endswith("s") else word
    if unit not in _UNIT_SECONDS:
        raise _Invalid(f"unit {word!r} is not minute(s), hour(s) or day(s)")
    if value <= 0:
        raise _Invalid("the value must be a positive whole number")
    if value == 1 and word.endswith("s"):
        raise _Invalid(f"a rate of 1 takes a singular unit: rate(1 {unit})")
    if value > 1 and not word.endswith("s"):
        raise _Invalid(f"a rate above 1 takes a plural unit: rate({value} {unit}s)")
    return Rate(value=value, unit=RateUnit(unit))


def _at(body: str) -> At:
    text = body.strip()
    if not _AT.match(text):
        raise _Invalid("expected at(yyyy-mm-ddThh:mm:ss), e.g. at(2026-01-01T02:00:00)")
    try:
        return At(when=datetime.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError as error:
        raise _Invalid(f"{text} is not a date and time: {error}") from None


def _cron(body: str) -> Cron:
    fields = body.split()
    if len(fields) != 6:
        raise _Invalid(f"EventBridge cron has 6 fields (minutes hours day-of-month month day-of-week year), "
                       f"got {len(fields)}")
    minute, hour, dom, month, dow, year = (f.upper() for f in fields)
    if (dom == "?") == (dow == "?"):
        if dom == "?":
            raise _Invalid("day-of-month and day-of-week cannot both be ?; give one of them "
                           f"(e.g. cron({fields[0]} {fields[1]} * {fields[3]} ? {fields[5]}))")
        example = f"cron({fields[0]} {fields[1]} ? {fields[3]} {fields[4]} {fields[5]})"
        raise _Invalid(f"day-of-month and day-of-week cannot both be given; make one of them ? (e.g. {example})")
    days = _day_of_week_rule(dow) if dom == "?" else _day_of_month_rule(dom)
    return Cron(minutes=_values(minute, _MINUTES), hours=_values(hour, _HOURS), months=_values(month, _MONTHS),
                years=_values(year, _YEARS), days=days)


def _values(text: str, spec: _Field) -> tuple[int, ...]:
    """The sorted values a field's list of ``*``, ``n``, ``a-b`` and ``x/step`` parts names."""
    if text == "?":
        raise _Invalid(f"? is for day-of-month or day-of-week, not {spec.name}")
    chosen: set[int] = set()
    for part in text.split(","):
        if not part:
            raise _Invalid(f"{spec.name} {text!r} has an empty list item")
        chosen.update(_part(part, spec))
    return tuple(sorted(chosen))


def _part(part: str, spec: _Field) -> list[int]:
    base, slash, step_text = part.partition("/")
    step = 1
    if slash and not spec.steps:
        raise _Invalid(f"{spec.name} takes no / step ({part!r}); list the days instead, e.g. MON,WED,FRI")
    if slash:
        if not step_text.isdigit() or not 0 < int(step_text) <= spec.high:
            raise _Invalid(f"{spec.name} step {step_text!r} in {part!r} is not a whole number 1..{spec.high}")
        step = int(step_text)
    if base == "*":
        first, last = spec.low, spec.high
    elif "-" in base:
        low_text, _, high_text = base.partition("-")
        first, last = _number(low_text, spec), _number(high_text, spec)
        if first > last and not spec.cyclic:
            raise _Invalid(f"{spec.name} range {base!r} runs backwards")
    else:
        first = _number(base, spec)
        last = spec.high if slash else first  # "5/15" starts at 5 and steps to the end of the field
    span = list(range(first, last + 1)) if first <= last else [*range(first, spec.high + 1),
                                                                 *range(spec.low, last + 1)]
    return span[::step]


def _number(text: str, spec: _Field) -> int:
    if text in spec.names:
        return spec.names.index(text) + 1
    if not text.isdigit():
        allowed = f" or {spec.names[0]}-{spec.names[-1]}" if spec.names else ""
        raise _Invalid(f"{spec.name} value {text!r} is not a number {spec.low}-{spec.high}{allowed}")
    value = int(text)
    if not spec.low <= value <= spec.high:
        raise _Invalid(f"{spec.name} value {value} is outside {spec.low}-{spec.high}")
    return value


def _day_of_month_rule(text: str) -> DayRule:
    special = _month_special(text)
    if special is not None:
        return special
    if any(mark in text for mark in ("L", "W", "#")):
        raise _Invalid(f"day-of-month {text!r}: L, L-n, nW and LW stand alone in their field")
    days = _values(text, _DAYS_OF_MONTH)
    return lambda year, month: [d for d in days if d <= _last_day(year, month)]


def _month_special(text: str) -> DayRule | None:
    """``L``, ``L-n``, ``LW`` and ``nW``, or None when ``text`` is none of them."""
    if text == "L":
        return lambda year, month: [_last_day(year, month)]
    if text == "LW":
        return lambda year, month: [_weekday_on_or_before(year, month, _last_day(year, month))]
    match = re.fullmatch(r"L-(\d+)", text)
    if match:
        back = int(match.group(1))
        if not 0 < back < 31:
            raise _Invalid(f"day-of-month {text!r}: L-n counts 1-30 days back from the last day")
        return lambda year, month: [_last_day(year, month) - back] if _last_day(year, month) > back else []
    match = re.fullmatch(r"(\d+)W", text)
    if match:
        day = int(match.group(1))
        if not 1 <= day <= 31:
            raise _Invalid(f"day-of-month {text!r}: nW takes a day 1-31")
        return lambda year, month: [_nearest_weekday(year, month, day)] if day <= _last_day(year, month) else []
    return None


def _day_of_week_rule(text: str) -> DayRule:
    if text == "L":
        text = "7"  # the last day of the week: Saturday
    match = re.fullmatch(r"([1-7]|[A-Z]{3})L", text)
    if match:
        weekday = _number(match.group(1), _DAYS_OF_WEEK)
        return lambda year, month: [max(_weekdays(year, month, weekday))]
    match = re.fullmatch(r"([1-7]|[A-Z]{3})#(\d+)", text)
    if match:
        weekday, nth = _number(match.group(1), _DAYS_OF_WEEK), int(match.group(2))
        if not 1 <= nth <= 5:
            raise _Invalid(f"day-of-week {text!r}: n#k takes k 1-5 (the k-th such day of the month)")
        return lambda year, month: _weekdays(year, month, weekday)[nth - 1:nth]
    if any(mark in text for mark in ("L", "W", "#")):
        raise _Invalid(f"day-of-week {text!r}: L, nL and n#k stand alone in their field")
    weekdays = frozenset(_values(text, _DAYS_OF_WEEK))
    return lambda year, month: [d for d in range(1, _last_day(year, month) + 1) if _weekday(year, month, d) in weekdays]


# ---------------------------------------------------------------- calendar arithmetic


def _last_day(year: int, month: int) -> int:
    return calendar.monthrange(year, month)[1]


def _weekday(year: int, month: int, day: int) -> int:
    """EventBridge's numbering: 1 = Sunday ... 7 = Saturday."""
    return datetime(year, month, day).isoweekday() % 7 + 1


def _weekdays(year: int, month: int, weekday: int) -> list[int]:
    return [d for d in range(1, _last_day(year, month) + 1) if _weekday(year, month, d) == weekday]


def _nearest_weekday(year: int, month: int, day: int) -> int:
    """The Monday-Friday nearest ``day``, never crossing into another month."""
    weekday, last = _weekday(year, month, day), _last_day(year, month)
    if weekday == 7:  # Saturday: the Friday before, or the Monday after when day is the 1st
        return day - 1 if day > 1 else day + 2
    if weekday == 1:  # Sunday: the Monday after, or the Friday before when day is the last
        return day + 1 if day < last else day - 2
    return day


def _weekday_on_or_before(year: int, month: int, day: int) -> int:
    while _weekday(year, month, day) in (1, 7):
        day -= 1
    return day


def _exists(naive: datetime, tz: tzinfo) -> bool:
    """False for a wall-clock time the clock skips in ``tz`` (spring forward)."""
    if tz is UTC:
        return True
    back = naive.replace(tzinfo=tz).astimezone(UTC).astimezone(tz).replace(tzinfo=None)
    return back == naive


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
