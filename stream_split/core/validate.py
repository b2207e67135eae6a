"""Which events the engine can use: the one place that checks the type of every field it reads.

Chrome's trace format is loose, and type-confused events occur (a ``"dur": "5"``, ``args`` as a
string, a ``pid`` that is a list). Such an event is not an error of the input: the engine
sends it to ``outside`` unchanged and counts it (``counts.invalid`` in the manifest), so that
nothing is lost and nothing in the engine ever meets a field of the wrong type.

What this module must never do: reject legal oddities. String pids and tids, integer or
float ``ts``, unknown categories, huge integers and string flow ids (Chrome allows them; they
link nothing here, as Kineto writes integers) are carried through as ordinary events.
A missing ``ph`` or ``ts`` stays an error of the input (``TraceEventError``): every trace event
has them. ``Splitter.feed`` checks the same rules inline on the fields it reads (the common
case, at no extra lookup); ``unusable_field`` is called for an event that fails them, to say
which field and why.
"""
from __future__ import annotations

import sys
from typing import Annotated, Any, TypedDict, Union

import msgspec
from msgspec import Meta

from stream_split.trace_format import DIMS_ARG

#: Integers beyond this are legal JSON but not a time stamp or a duration in µs.
TIME_LIMIT = _TIME_LIMIT = 2 ** 63
#: What a pid or tid may be.
THREAD_ID_TYPES = frozenset({int, str, float})

# The same rules as msgspec types, for a decoder that checks them as it parses (the slim
# batches of ``decode.TraceDecoder``): what it accepts, ``unusable_field`` accepts too, so the
# engine skips its own check of such a batch (``Splitter.feed_batch``'s ``checked``).
#: A time stamp or a duration: an integer within ``TIME_LIMIT``, or a finite float.
TIME = Union[Annotated[int, Meta(ge=1 - TIME_LIMIT, le=TIME_LIMIT - 1)],
             Annotated[float, Meta(ge=-sys.float_info.max, le=sys.float_info.max)]]
#: A pid or a tid (``THREAD_ID_TYPES``), or null.
THREAD_ID = Union[int, float, str, None]
#: The type of each event field the engine reads (``trace_format.ENGINE_FIELDS``, ``args``
#: aside; ``id`` is read only as an integer or not) and of each ``args`` key it reads. In the
#: order Kineto writes the keys of an op, a kernel or a runtime call: msgspec looks a key up
#: first at the field after the one found last (as ``decode._PlainFrame``; on the 10x stripped
#: resnet tile's 220 k other events, about 50 M instructions fewer than ts and dur before pid).
FIELD_TYPES = {"ph": str, "cat": Union[str, None], "name": Union[str, None], "pid": THREAD_ID,
               "tid": THREAD_ID, "ts": TIME, "dur": Union[TIME, None], "id": Any}
ARG_TYPES = {"correlation": Union[int, None], "External id": Union[int, None]}


def _get(self, key: str, default=None):
    """A field by its name in the JSON, as ``dict.get`` reads it (absent or null: None)."""
    return getattr(self, key, default)


def _slim_event_type(name: str, dims) -> type:
    """An event's fields that the engine reads, typed as ``FIELD_TYPES`` and ``ARG_TYPES``
    (``args`` a dict of those keys and ``Input Dims`` typed ``dims``), as a struct: see
    ``SlimEvent``."""
    args = TypedDict(f"{name}Args", {**ARG_TYPES, DIMS_ARG: dims}, total=False)
    fields = [(field, kind, None) for field, kind in FIELD_TYPES.items()]
    return msgspec.defstruct(name, [*fields, ("args", Union[args, None], None)],
                             namespace={"get": _get}, module=__name__, gc=False)


#: A slim event (``decode.TraceDecoder.slim``): the fields the engine reads, of the types it
#: needs (checked as decoded, so the engine does not check them again: ``Splitter.feed_batch``),
#: as a struct (a dict per event cost 40 % more to decode). A field the event lacks reads
#: None (``ph`` and ``ts``, which are never null, when absent); ``get`` reads a field as a
#: dict's ``get`` does, for the engine's paths that take events of either kind.
#: ``SlimEvent`` keeps ``args``' ``Input Dims`` as its JSON text (``msgspec.Raw``,
#: ``decode.TraceDecoder.lazy_dims``, as ``run.drive`` and ``parallel``'s workers read);
#: ``SlimEventWithDims`` parsed (a slim decoder without ``lazy_dims``).
SlimEvent = _slim_event_type("SlimEvent", msgspec.Raw)
SlimEventWithDims = _slim_event_type("SlimEventWithDims", Any)

#: Field -> what it must be when present, for the checks' messages.
_EXPECTED = {"ph": "a string", "cat": "a string", "name": "a string", "dur": "a finite number within 64 bits",
             "ts": "a finite number within 64 bits", "pid": "a string or a number",
             "tid": "a string or a number", "args": "an object",
             "correlation": "an integer", "External id": "an integer"}


def _is_time(value) -> bool:
    kind = value.__class__
    if kind is float:
        return value - value == 0.0  # finite (1e999 parses as inf)
    return kind is int and -_TIME_LIMIT < value < _TIME_LIMIT


def _is_thread_id(value) -> bool:
    kind = value.__class__
    return kind is int or kind is str or kind is float


def unusable_field(event: dict) -> str | None:
    """None if the engine can use every field it reads of ``event``; else which one it cannot
    use and why (one line). ``ph`` and ``ts`` are known to be present."""
    field = None
    if event["ph"].__class__ is not str:
        field = "ph"
    elif not _is_time(event["ts"]):
        field = "ts"
    else:
        get = event.get
        value = get("cat")
        if value is not None and value.__class__ is not str:
            field = "cat"
        elif (value := get("name")) is not None and value.__class__ is not str:
            field = "name"
        elif (value := get("dur")) is not None and not _is_time(value):
            field = "dur"
        elif (value := get("pid")) is not None and not _is_thread_id(value):
            field = "pid"
        elif (value := get("tid")) is not None and not _is_thread_id(value):
            field = "tid"
        elif (args := get("args")) is not None:
            if args.__class__ is not dict:
                field = "args"
            elif (value := args.get("correlation")) is not None and value.__class__ is not int:
                field = "correlation"
            elif (value := args.get("External id")) is not None and value.__class__ is not int:
                field = "External id"
    if field is None:
        return None
    value = event["args"][field] if field in ("correlation", "External id") else event[field]
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return f'"{field}" is not {_EXPECTED[field]}: {shown}'
