"""One event back to JSON bytes: the one place that serializes events.

orjson for speed; the standard library for what orjson refuses (integers beyond 64 bits), so
content goes out as it came in. ``RawEvent`` marks an event that is already bytes (the engine
keeps events it must hold for a while in this form: a few hundred bytes instead of a dict).
"""
from __future__ import annotations

import json

import orjson


class RawEvent(bytes):
    """An event already serialized as JSON."""
    __slots__ = ()


def event_json(event) -> bytes:
    """JSON bytes of one event (or any JSON value), preserving what the reader produced."""
    if type(event) is RawEvent:
        return event
    try:
        return orjson.dumps(event)
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
