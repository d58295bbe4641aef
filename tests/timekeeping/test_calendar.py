from datetime import date

import pytest

from recoup.errors import InvalidInput
from recoup.timekeeping.calendar import BusinessCalendar, parse_weekend

US = BusinessCalendar(country="US")
ENGLAND = BusinessCalendar(country="GB", subdivision="ENG")
GERMANY = BusinessCalendar(country="DE")


def test_us_thanksgiving_week_skips_thursday() -> None:
    # Thanksgiving is Thu 2026-11-26: Wednesday's next business day is Friday, and four
    # business days after Monday are Tue, Wed, Fri and the next Monday.
    assert not US.is_business_day(date(2026, 11, 26))
    assert US.next_business_day(date(2026, 11, 25)) == date(2026, 11, 27)
    assert US.add_business_days(date(2026, 11, 23), 4) == date(2026, 11, 30)


def test_uk_christmas_uses_the_boxing_day_substitute() -> None:
    # Christmas is Fri 2026-12-25 and Boxing Day Sat 12-26, so Mon 12-28 is the substitute
    # holiday: after Christmas Eve the next business day is Tue 12-29.
    assert not ENGLAND.is_business_day(date(2026, 12, 28))
    assert ENGLAND.next_business_day(date(2026, 12, 24)) == date(2026, 12, 29)


def test_german_easter_closes_good_friday_and_easter_monday() -> None:
    # Easter Sunday is 2026-04-05: Fri 04-03 and Mon 04-06 are holidays nationwide.
    assert GERMANY.next_business_day(date(2026, 4, 2)) == date(2026, 4, 7)


def test_a_friday_saturday_weekend_opens_on_sunday() -> None:
    # As in Saudi Arabia: after Thu 2026-01-08 the next working day is Sun 2026-01-11.
    calendar = BusinessCalendar(weekend=parse_weekend("weekend", ["fri", "sat"]))
    assert calendar.next_business_day(date(2026, 1, 8)) == date(2026, 1, 11)
    assert calendar.is_business_day(date(2026, 1, 11))


def test_a_sunday_only_weekend_keeps_saturday_open() -> None:
    # Fri 2026-01-09 → Sat 01-10 is open; Sat → Mon 01-12 skips only Sunday.
    calendar = BusinessCalendar(weekend=parse_weekend("weekend", ["sunday"]))
    assert calendar.next_business_day(date(2026, 1, 9)) == date(2026, 1, 10)
    assert calendar.next_business_day(date(2026, 1, 10)) == date(2026, 1, 12)


def test_adding_zero_business_days_keeps_the_date_even_on_a_weekend() -> None:
    # k business days *after* the date, whether or not the date itself is one.
    assert US.add_business_days(date(2026, 11, 28), 0) == date(2026, 11, 28)
    assert US.add_business_days(date(2026, 11, 28), 1) == date(2026, 11, 30)


def test_on_or_after_keeps_a_business_day_and_moves_a_holiday() -> None:
    # Thanksgiving moves to Friday; Friday stays.
    assert US.on_or_after(date(2026, 11, 26)) == date(2026, 11, 27)
    assert US.on_or_after(date(2026, 11, 27)) == date(2026, 11, 27)


def test_extra_closed_dates_are_holidays() -> None:
    # A company shutdown day on Wed 2026-07-01.
    calendar = BusinessCalendar(closed=frozenset({date(2026, 7, 1)}))
    assert calendar.next_business_day(date(2026, 6, 30)) == date(2026, 7, 2)


def test_holidays_between_lists_closed_weekdays_only() -> None:
    # December 2026 in England: Christmas (Fri) and the substitute (Mon); Boxing Day itself is a
    # Saturday, already a weekend day.
    assert ENGLAND.holidays_between(date(2026, 12, 1), date(2026, 12, 31)) == [
        date(2026, 12, 25),
        date(2026, 12, 28),
    ]


def test_it_refuses_a_negative_count() -> None:
    with pytest.raises(InvalidInput, match="k"):
        US.add_business_days(date(2026, 1, 1), -1)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"country": "ZZ"}, "country"),  # no such country
        ({"country": "DE", "subdivision": "XX"}, "subdivision"),  # no such Land
        ({"weekend": frozenset(range(7))}, "weekend"),  # never open
        ({"weekend": frozenset({7})}, "weekend"),  # not a weekday number
    ],
)
def test_it_refuses_a_bad_calendar_naming_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        BusinessCalendar(**kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_parse_weekend_refuses_unknown_names_and_all_seven_days() -> None:
    with pytest.raises(InvalidInput, match="caturday"):
        parse_weekend("weekend", ["caturday"])
    with pytest.raises(InvalidInput, match="at least one"):
        parse_weekend("weekend", ["mon", "tue", "wed", "thu", "fri", "sat", "sun"])
