"""The reference parser of the tests: a whole trace parsed by ijson (the ``test`` extra), to
compare the streaming decoder against (and a second opinion for anyone who doubts it)."""
from __future__ import annotations

import io

import ijson

from stream_split.decode import Decompressor, sniff_form
from stream_split.trace_format import EVENTS_KEY

__all__ = ["reference_events"]


def reference_events(data: bytes, *, backend: str = "yajl2_c"):
    """Events and header keys of a whole trace (bytes, maybe compressed) parsed by ijson: the
    reference for the decoder. ``backend="python"`` keeps integers beyond 64 bits exact.
    Returns (events, header keys before and after the events merged, form, complete): a
    document cut short gives the events before the cut and complete False."""
    backend_module = ijson.get_backend(backend)
    decompressor = Decompressor()
    text = decompressor.feed(data) + decompressor.finish()
    if text.startswith(b"\xef\xbb\xbf"):
        text = text[3:]
    form = sniff_form(text, final=True)
    prefix = {"jsonl": "", "array": "item", "object": EVENTS_KEY + ".item"}[form]
    events, header, complete = [], {}, True
    try:
        for event in backend_module.items(io.BytesIO(text), prefix, use_float=True,
                                          multiple_values=form == "jsonl"):
            events.append(event)
        if form == "object":
            for key, value in backend_module.kvitems(io.BytesIO(text), "", use_float=True):
                if key != EVENTS_KEY:
                    header[key] = value
    except ijson.IncompleteJSONError:
        complete = False
    return events, header, form, complete and not decompressor.truncated
