"""One event back to JSON bytes: the one place that serializes events.

orjson for speed; the standard library for what orjson refuses (integers beyond 64 bits, lone
surrogates), so content goes out as it came in. Events read from a trace usually need none of
this: the writers send their original bytes (``decode.Events.raws``) out as they came.

What the tool computes (the manifest, records, tables) is strict JSON: ``finite`` turns a number
that is not finite (a sum or difference of legal timestamps beyond a double, near 1.7e308) into
null, and ``strict_json`` writes with ``allow_nan=False``, so one left over is an error.
"""
from __future__ import annotations

import json
import math
import re

import orjson

from stream_split.core.records import LINE_LAYOUTS
from stream_split.native import NATIVE as _native  # (None: the Python fallbacks)


# A lone surrogate as Python's "surrogatepass" writes it (never valid UTF-8).
_SURROGATE_UTF8 = re.compile(rb"\xed[\xa0-\xbf][\x80-\xbf]")


def _surrogate_escape(m: re.Match) -> bytes:
    return b"\\u%04x" % ord(m.group().decode("utf-8", "surrogatepass"))


def event_json(event) -> bytes:
    """JSON bytes of one event (or any JSON value), preserving what the reader produced:
    a lone surrogate (legal as a JSON escape, refused by orjson) goes out as the escape."""
    try:
        return orjson.dumps(event)
    except (TypeError, orjson.JSONEncodeError):
        text = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
        return _SURROGATE_UTF8.sub(_surrogate_escape, text.encode("utf-8", "surrogatepass"))


def strict_event_json(value) -> bytes:
    """``event_json(finite(value))``: orjson writes a number that is not finite as null, as
    ``finite`` makes it, so only where orjson refuses ``value`` is ``finite`` needed (its
    check encodes the value once more: as much again as orjson's whole encoding)."""
    try:
        return orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        return event_json(finite(value))


def json_lines(values: list) -> bytes:
    """Each of ``values`` as ``strict_event_json`` writes it, a line each (JSON Lines: the
    records of ``boundaries``). By ``_native.json_lines`` where built and it writes them all
    (the exact JSON types, numbers as orjson writes them): no call of Python a value, no line
    copied to add its newline (callgrind, the records of 30 k one-op iterations: orjson's
    dumps was 44 % of the sink); else a value at a time."""
    if _native is not None:
        lines = _native.json_lines(values)
        if lines is not None:
            return lines
    return b"".join([strict_event_json(value) + b"\n" for value in values])


def record_lines(records) -> bytes:
    """``json_lines`` of each record's ``to_dict(shared=True)`` (the JSONL records of
    ``boundaries``): by ``_native.record_lines`` where built, each record of a class of
    ``records.LINE_LAYOUTS`` written from its slots, no dict made (callgrind, boundaries of
    30 k one-op iterations: see ``write.JsonlRecordSink``); else from their dicts. Any
    iterable of records, read once (the native call takes a list)."""
    if records.__class__ is not list:
        records = list(records)
    if _native is not None and (lines := _native.record_lines(records, LINE_LAYOUTS)) is not None:
        return lines
    return json_lines([record.to_dict(shared=True) for record in records])


def spaced_json(value) -> bytes:
    """JSON bytes with the standard library's spacing (``", "`` and ``": "``), as Kineto writes
    its header keys; lone surrogates go out as escapes, as in ``event_json``."""
    text = json.dumps(value, ensure_ascii=False)
    return _SURROGATE_UTF8.sub(_surrogate_escape, text.encode("utf-8", "surrogatepass"))


def finite(value):
    """``value`` (nested dicts, lists and tuples of JSON values) with every float that is not
    finite (inf, -inf, NaN: not JSON) replaced by None; finite values are returned as they
    are, containers copied only where something changed. Mostly every number is finite: the
    standard library's C encoder says so at a fraction of the walk's cost (a manifest of
    300 k iterations), and the walk (``walked_finite``) runs only where it does not."""
    try:
        json.dumps(value, allow_nan=False)
    except (ValueError, TypeError):
        return walked_finite(value)
    return value


def walked_finite(value):
    """``finite`` by its walk alone, without the encoder's check first: for a value that
    holds an object of the caller's, which the encoder refuses (the manifest's
    ``ManifestIterations``) after it has encoded every number before it, for nothing (the
    evidence of a loop of 30 k one-op iterations lists 30 k similarities: some 10 ms of
    floats written out). A list of numbers each finite is checked in C
    (``_finite_numbers``), not walked."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        out = {k: walked_finite(v) for k, v in value.items()}
        return value if all(out[k] is v for k, v in value.items()) else out
    if isinstance(value, (list, tuple)):
        if _finite_numbers(value):
            return value
        out = [walked_finite(v) for v in value]
        return value if all(a is b for a, b in zip(out, value)) else out
    return value


def _finite_numbers(values) -> bool:
    """Are ``values`` all numbers, each finite? Their exact sum (``math.fsum``) is finite only
    then: an infinity or a NaN among them makes it one (or raises), and so does a sum too
    large for a float. False for anything else in them (a dict, a string)."""
    try:
        return math.isfinite(math.fsum(values))
    except (TypeError, ValueError, OverflowError):
        return False


def strict_json(value, **options) -> str:
    """``json.dumps`` of ``value`` with its non-finite numbers as null (``finite``), written
    with ``allow_nan=False``: what the tool writes is JSON for strict readers too."""
    try:  # mostly every number is finite: no copy
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:
        return json.dumps(walked_finite(value), allow_nan=False, **options)
