"""stream_split.core.validate: which events the engine can use. Each field the engine reads,
of a wrong type, is named in one line; legal oddities of Chrome's format pass."""
import pytest

from stream_split.core.validate import TIME_LIMIT, unusable_field

GOOD = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 10.0, "dur": 5.0, "pid": 1,
        "tid": 2, "args": {"correlation": 7, "External id": 8}}


def with_field(field, value) -> dict:
    event = dict(GOOD, args=dict(GOOD["args"]))
    if field in ("correlation", "External id"):
        event["args"][field] = value
    else:
        event[field] = value
    return event


def test_a_well_typed_event_is_usable():
    assert unusable_field(GOOD) is None


def test_only_ph_and_ts_are_needed():
    assert unusable_field({"ph": "i", "ts": 0}) is None


@pytest.mark.parametrize("field, value, expected", [
    ("ph", 5, "a string"),
    ("ph", ["X"], "a string"),
    ("ts", "10", "a finite number within 64 bits"),
    ("ts", None, "a finite number within 64 bits"),
    ("ts", float("inf"), "a finite number within 64 bits"),
    ("ts", float("nan"), "a finite number within 64 bits"),
    ("ts", TIME_LIMIT, "a finite number within 64 bits"),
    ("ts", -TIME_LIMIT, "a finite number within 64 bits"),
    ("ts", True, "a finite number within 64 bits"),
    ("cat", ["cpu_op"], "a string"),
    ("name", 5, "a string"),
    ("name", {"a": 1}, "a string"),
    ("dur", "5", "a finite number within 64 bits"),
    ("dur", [5], "a finite number within 64 bits"),
    ("dur", float("-inf"), "a finite number within 64 bits"),
    ("dur", 2 ** 80, "a finite number within 64 bits"),
    ("pid", [1], "a string or a number"),
    ("tid", {"a": 1}, "a string or a number"),
    ("tid", True, "a string or a number"),
    ("args", "text", "an object"),
    ("args", [1], "an object"),
    ("correlation", "7", "an integer"),
    ("correlation", 7.0, "an integer"),
    ("correlation", [7], "an integer"),
    ("External id", "7", "an integer"),
    ("External id", {"a": 7}, "an integer"),
])
def test_a_field_of_the_wrong_type_is_named_with_what_it_must_be(field, value, expected):
    problem = unusable_field(with_field(field, value))
    assert problem == f'"{field}" is not {expected}: {value!r}'


@pytest.mark.parametrize("field, value", [
    ("pid", "Spans"), ("tid", ""), ("pid", 1.5), ("tid", 2 ** 70),
    ("ts", 3), ("ts", 1.5), ("ts", -5), ("ts", TIME_LIMIT - 1), ("ts", -(TIME_LIMIT - 1)),
    ("dur", 0), ("dur", 0.25),
    ("cat", "a category nobody knows"), ("name", ""),
    ("args", {}), ("args", {"id": "x7", "flow": [1, 2], "Python id": None}),
])
def test_legal_oddities_are_usable(field, value):
    assert unusable_field(with_field(field, value)) is None


@pytest.mark.parametrize("field", ["cat", "name", "dur", "pid", "tid", "args"])
def test_an_absent_or_null_optional_field_is_usable(field):
    event = dict(GOOD)
    event[field] = None
    assert unusable_field(event) is None
    del event[field]
    assert unusable_field(event) is None


def test_the_first_unusable_field_in_reading_order_is_named():
    event = dict(GOOD, ph=1, ts="x", cat=2, name=3, dur="4", pid=[5], tid=[6], args=[])
    order = []
    while (problem := unusable_field(event)) is not None:
        field = problem.split('"')[1]
        order.append(field)
        event[field] = GOOD[field]
    assert order == ["ph", "ts", "cat", "name", "dur", "pid", "tid", "args"]


def test_correlation_is_checked_before_external_id():
    event = with_field("correlation", "1")
    event["args"]["External id"] = "2"
    assert unusable_field(event).startswith('"correlation"')


def test_a_long_value_is_shortened_to_forty_characters():
    problem = unusable_field(with_field("name", ["x" * 100]))
    shown = problem.split(": ", 1)[1]
    assert len(shown) == 40 and shown.endswith("...") and shown.startswith("['xxx")


def test_a_value_of_exactly_forty_characters_is_shown_whole():
    value = "x" * 38  # its repr, quotes included, is 40 characters
    assert unusable_field(with_field("correlation", value)).endswith(": " + repr(value))
