"""One event back to JSON bytes: the one place that serializes events.

orjson for speed; the standard library for what orjson refuses (integers beyond 64 bits, lone
surrogates), so content goes out as it came in. ``RawEvent`` marks an event that is already bytes (the engine
keeps events it must hold for a while in this form: a few hundred bytes instead of a dict).
"""
from __future__ import annotations

import json
import re

import orjson


class RawEvent(bytes):
    """An event already serialized as JSON."""
    __slots__ = ()


# A lone surrogate as Python's "surrogatepass" writes it (never valid UTF-8).
_SURROGATE_UTF8 = re.compile(rb"\xed[\xa0-\xbf][\x80-\xbf]")


def _surrogate_escape(m: re.Match) -> bytes:
    return b"\\u%04x" % ord(m.group().decode("utf-8", "surrogatepass"))


def event_json(event) -> bytes:
    """JSON bytes of one event (or any JSON value), preserving what the reader produced:
    a lone surrogate (legal as a JSON escape, refused by orjson) goes out as the escape."""
    if type(event) is RawEvent:
        return event
    try:
        return orjson.dumps(event)
    except (TypeError, orjson.JSONEncodeError):
        text = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
        return _SURROGATE_UTF8.sub(_surrogate_escape, text.encode("utf-8", "surrogatepass"))


def spaced_json(value) -> bytes:
    """JSON bytes with the standard library's spacing (``", "`` and ``": "``), as Kineto writes
    its header keys; lone surrogates go out as escapes, as in ``event_json``."""
    text = json.dumps(value, ensure_ascii=False)
    return _SURROGATE_UTF8.sub(_surrogate_escape, text.encode("utf-8", "surrogatepass"))
