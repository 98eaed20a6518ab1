"""The one parser of AWS's schedule dialect (sqsjobs.schedules._cron): AWS's examples, its refusals,
time zones with Scheduler's daylight-saving rule, and a property against aws-croniter (UTC)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from aws_croniter import AwsCroniter
from hypothesis import given, settings
from hypothesis import strategies as st

from sqsjobs import ConfigurationError
from sqsjobs.schedules._cron import Kind, parse

JAN_1 = datetime(2026, 1, 1, tzinfo=UTC)  # a Thursday
NEW_YORK = "America/New_York"  # 2026: clocks skip 02:00-03:00 on March 8, repeat 01:00-02:00 on November 1


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


# -- AWS's documented examples (EventBridge user guide, "Cron expressions") and the special wildcards
@pytest.mark.parametrize(("expression", "first_three"), [
    ("cron(0 10 * * ? *)", [utc(2026, 1, 1, 10), utc(2026, 1, 2, 10), utc(2026, 1, 3, 10)]),
    ("cron(15 12 * * ? *)", [utc(2026, 1, 1, 12, 15), utc(2026, 1, 2, 12, 15), utc(2026, 1, 3, 12, 15)]),
    ("cron(0 18 ? * MON-FRI *)", [utc(2026, 1, 1, 18), utc(2026, 1, 2, 18), utc(2026, 1, 5, 18)]),
    ("cron(0 8 1 * ? *)", [utc(2026, 1, 1, 8), utc(2026, 2, 1, 8), utc(2026, 3, 1, 8)]),
    ("cron(0/15 * * * ? *)", [utc(2026, 1, 1, 0, 15), utc(2026, 1, 1, 0, 30), utc(2026, 1, 1, 0, 45)]),
    ("cron(0/10 * ? * MON-FRI *)", [utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 0, 20), utc(2026, 1, 1, 0, 30)]),
    ("cron(0/5 8-17 ? * MON-FRI *)", [utc(2026, 1, 1, 8), utc(2026, 1, 1, 8, 5), utc(2026, 1, 1, 8, 10)]),
    ("cron(0 9 ? * 2#1 *)", [utc(2026, 1, 5, 9), utc(2026, 2, 2, 9), utc(2026, 3, 2, 9)]),  # first Monday
    ("cron(0 10 L * ? *)", [utc(2026, 1, 31, 10), utc(2026, 2, 28, 10), utc(2026, 3, 31, 10)]),
    ("cron(0 10 L-2 * ? *)", [utc(2026, 1, 29, 10), utc(2026, 2, 26, 10), utc(2026, 3, 29, 10)]),
    ("cron(0 10 LW * ? *)", [utc(2026, 1, 30, 10), utc(2026, 2, 27, 10), utc(2026, 3, 31, 10)]),  # last weekday
    ("cron(0 10 1W * ? *)", [utc(2026, 1, 1, 10), utc(2026, 2, 2, 10), utc(2026, 3, 2, 10)]),  # Feb 1: a Sunday
    ("cron(0 10 31W * ? *)", [utc(2026, 1, 30, 10), utc(2026, 3, 31, 10), utc(2026, 5, 29, 10)]),  # no 31 in Feb
    ("cron(0 10 ? * 6L *)", [utc(2026, 1, 30, 10), utc(2026, 2, 27, 10), utc(2026, 3, 27, 10)]),  # last Friday
    ("cron(0 10 ? * L *)", [utc(2026, 1, 3, 10), utc(2026, 1, 10, 10), utc(2026, 1, 17, 10)]),  # L alone: SAT
    ("cron(0 10 ? * FRI-MON *)", [utc(2026, 1, 2, 10), utc(2026, 1, 3, 10), utc(2026, 1, 4, 10)]),  # wraps
    ("cron(0 22-2 * * ? *)", [utc(2026, 1, 1, 1), utc(2026, 1, 1, 2), utc(2026, 1, 1, 22)]),
    ("cron(0 12 1 * ? 2027/2)", [utc(2027, 1, 1, 12), utc(2027, 2, 1, 12), utc(2027, 3, 1, 12)]),
    ("cron(0 18 ? jan,Mar * 2027)", [utc(2027, 1, 1, 18), utc(2027, 1, 2, 18), utc(2027, 1, 3, 18)]),
    ("cron(0 0 29 2 ? *)", [utc(2028, 2, 29), utc(2032, 2, 29), utc(2036, 2, 29)]),
    ("rate(1 day)", [utc(2026, 1, 2), utc(2026, 1, 3), utc(2026, 1, 4)]),
    ("rate(90 minutes)", [utc(2026, 1, 1, 1, 30), utc(2026, 1, 1, 3), utc(2026, 1, 1, 4, 30)]),
    ("at(2026-01-01T02:00:00)", [utc(2026, 1, 1, 2)]),
])
def test_documented_expressions_fire_when_aws_says(expression: str, first_three: list[datetime]) -> None:
    assert parse(expression).next_times(JAN_1, 3) == first_three


@pytest.mark.parametrize(("expression", "says"), [
    ("cron(0 10 * * ?)", "EventBridge cron has 6 fields (minutes hours day-of-month month day-of-week year), got 5"),
    ("cron(0 18 * * MON-FRI *)", "cannot both be given; make one of them ? (e.g. cron(0 18 ? * MON-FRI *))"),
    ("cron(* * * * * *)", "cannot both be given"),
    ("cron(0 10 ? * ? *)", "cannot both be ?"),
    ("cron(60 10 * * ? *)", "minutes value 60 is outside 0-59"),
    ("cron(0 24 * * ? *)", "hours value 24 is outside 0-23"),
    ("cron(0 10 32 * ? *)", "day-of-month value 32 is outside 1-31"),
    ("cron(0 10 * 13 ? *)", "month value 13 is outside 1-12"),
    ("cron(0 10 * FOO ? *)", "month value 'FOO' is not a number 1-12 or JAN-DEC"),
    ("cron(0 10 ? * 8 *)", "day-of-week value 8 is outside 1-7"),
    ("cron(0 10 ? * 2#6 *)", "n#k takes k 1-5"),
    ("cron(0 10 * * ? 2200)", "year value 2200 is outside 1970-2199"),
    ("cron(0 10 * * ? 2030-2027)", "year range '2030-2027' runs backwards"),
    ("cron(0 10 L,1 * ? *)", "L, L-n, nW and LW stand alone"),
    ("cron(0 10 ? * 2#1,3 *)", "L, nL and n#k stand alone"),
    ("cron(0/0 10 * * ? *)", "step '0'"),
    ("cron(0 10 ? * 2/2 *)", "day-of-week takes no / step ('2/2'); list the days instead"),
    ("cron(0 ? * * ? *)", "? is for day-of-month or day-of-week, not hours"),
    ("cron(0 10 L-31 * ? *)", "L-n counts 1-30 days back"),
    ("rate(0 minutes)", "positive whole number"),
    ("rate(1 hours)", "a rate of 1 takes a singular unit: rate(1 hour)"),
    ("rate(5 hour)", "a rate above 1 takes a plural unit: rate(5 hours)"),
    ("rate(1 week)", "unit 'week' is not minute(s), hour(s) or day(s)"),
    ("rate(five minutes)", "expected rate(value unit)"),
    ("at(2026-02-30T00:00:00)", "is not a date and time"),
    ("at(2026-01-01 00:00:00)", "expected at(yyyy-mm-ddThh:mm:ss)"),
    ("every day", "is not an EventBridge expression: use cron(...), rate(...) or at(...)"),
])
def test_what_aws_refuses_is_refused_in_one_line_that_says_why(expression: str, says: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        parse(expression)
    message = str(refused.value)
    assert says in message and message.startswith(f"schedule {expression!r}") and "\n" not in message


def test_a_skipped_wall_clock_time_does_not_fire_and_a_repeated_one_fires_once() -> None:
    # 02:30 does not exist in New York on 2026-03-08: that day has no run.
    spring = parse("cron(30 2 * * ? *)").next_times(utc(2026, 3, 6), 4, NEW_YORK)
    assert spring == [utc(2026, 3, 6, 7, 30), utc(2026, 3, 7, 7, 30), utc(2026, 3, 9, 6, 30), utc(2026, 3, 10, 6, 30)]
    # 01:30 happens twice on 2026-11-01 (EDT, then EST): one run, on the first pass.
    autumn = parse("cron(30 1 * * ? *)").next_times(utc(2026, 10, 31), 3, NEW_YORK)
    assert autumn == [utc(2026, 10, 31, 5, 30), utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]
    # Every half hour: the repeated hour is not run again.
    half_hours = parse("cron(0/30 0-3 * * ? *)").next_times(utc(2026, 11, 1, 4), 6, NEW_YORK)
    assert half_hours == [utc(2026, 11, 1, 4, 30), utc(2026, 11, 1, 5), utc(2026, 11, 1, 5, 30),
                          utc(2026, 11, 1, 7), utc(2026, 11, 1, 7, 30), utc(2026, 11, 1, 8)]


def test_rates_count_durations_whatever_the_clock_does() -> None:
    # A rate(1 day) started at 09:00 New York time runs at 10:00 local after the spring change: 24 h apart.
    start = datetime(2026, 3, 7, 14, tzinfo=UTC)
    runs = parse("rate(1 day)").next_times(start, 2, NEW_YORK, start=start)
    assert [b - a for a, b in zip([start, *runs], runs, strict=False)] == [timedelta(days=1)] * 2


def test_at_is_read_in_its_time_zone_and_fires_once() -> None:
    at = parse("at(2026-07-01T09:00:00)")
    assert at.kind is Kind.AT
    assert at.next_after(JAN_1, "Europe/Paris") == utc(2026, 7, 1, 7)
    assert at.next_after(utc(2026, 7, 1, 7), "Europe/Paris") is None
    assert at.fires_at(utc(2026, 7, 1, 7, 0, 42), "Europe/Paris")


def test_a_bad_time_zone_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="time zone 'Nowhere/Land' is not an IANA name"):
        parse("cron(0 10 * * ? *)").next_after(JAN_1, "Nowhere/Land")


# -- a property: random expressions of the dialect fire exactly when aws-croniter says (it knows UTC only)
def _field(low: int, high: int, *, steps: bool = True) -> st.SearchStrategy[str]:
    number = st.integers(low, high)
    parts = [
        st.just("*"),
        number.map(str),
        st.tuples(number, number).map(lambda r: f"{min(r)}-{max(r)}"),
        st.lists(number, min_size=2, max_size=4, unique=True).map(lambda v: ",".join(map(str, v))),
    ]
    if steps:
        parts.append(st.tuples(number, st.integers(1, high - low)).map(lambda s: f"{s[0]}/{s[1]}"))
    return st.one_of(*parts)


_DAY_OF_MONTH = st.one_of(_field(1, 31), st.sampled_from(["L", "L-1", "L-5", "15W", "1W", "30W"]))
_DAY_OF_WEEK = st.one_of(_field(1, 7, steps=False),
                         st.sampled_from(["MON-FRI", "SUN", "2#1", "6#3", "5L", "1L", "7#5"]))


@st.composite
def expressions(draw: st.DrawFn) -> str:
    minute, hour, month = draw(_field(0, 59)), draw(_field(0, 23)), draw(_field(1, 12))
    if draw(st.booleans()):
        dom, dow = draw(_DAY_OF_MONTH), "?"
    else:
        dom, dow = "?", draw(_DAY_OF_WEEK)
    year = draw(st.sampled_from(["*", "2026", "2026-2030", "2027,2029"]))  # aws-croniter takes no year step
    return f"{minute} {hour} {dom} {month} {dow} {year}"


@settings(derandomize=True, max_examples=150, deadline=None)
@given(fields=expressions(), start=st.datetimes(datetime(2026, 1, 1), datetime(2028, 12, 31)))
def test_fire_times_agree_with_aws_croniter_in_utc(fields: str, start: datetime) -> None:
    after = start.replace(tzinfo=UTC)
    ours = parse(f"cron({fields})").next_times(after, 5)
    theirs = [t for t in AwsCroniter(fields).get_next(after, 5) if t is not None]
    # aws-croniter stops looking after a bounded search (e.g. Feb 29 on some weekday): compare what it found.
    assert ours[:len(theirs)] == theirs


@settings(derandomize=True, max_examples=60, deadline=None)
@given(fields=expressions(), start=st.datetimes(datetime(2026, 1, 1), datetime(2027, 12, 31)),
       timezone=st.sampled_from(["UTC", NEW_YORK, "Europe/Paris", "Asia/Kolkata", "Australia/Lord_Howe"]))
def test_each_fire_time_is_one_of_the_expressions_wall_clock_minutes_in_its_zone(fields: str, start: datetime,
                                                                                timezone: str) -> None:
    from zoneinfo import ZoneInfo

    parsed = parse(f"cron({fields})")
    after = start.replace(tzinfo=UTC)
    times = parsed.next_times(after, 4, timezone)
    assert times == sorted(set(times)) and all(t > after for t in times)
    for moment in times:
        local = moment.astimezone(ZoneInfo(timezone))
        assert parsed.cron is not None and parsed.cron.names(local.replace(tzinfo=None))
        assert local.fold == 0  # a repeated wall-clock minute fires on its first pass only
        assert parsed.fires_at(moment, timezone)
