"""Protobuf form of records and manifests (``proto/stream_split/v1/records.proto``).

Converts ``Boundary`` / ``Revision`` / ``IterationRecord`` and the summary and manifest dicts to the
generated messages, and frames messages as varint-length-prefixed bytes for record streams.
Message fields carry the same names as the dict keys; ``None`` leaves a field unset.
"""
from __future__ import annotations

import io
import json
from functools import cache
from typing import BinaryIO, Iterator

from stream_split._proto.stream_split.v1 import records_pb2 as pb
from stream_split.core.records import Boundary, IterationRecord, Revision

try:
    from google.protobuf import proto as _proto
except ImportError:  # protobuf < 5.27
    _proto = None
_serialize_length_prefixed = getattr(_proto, "serialize_length_prefixed", None)
_parse_length_prefixed = getattr(_proto, "parse_length_prefixed", None)

Record = pb.Record
Manifest = pb.Manifest


def _scalars(message_class, fields: dict):
    """``message_class`` from the entries of ``fields`` named like its non-message fields."""
    names, text = _scalar_fields(message_class)
    return message_class(**{name: _utf8(str(fields[name]) if name in text else fields[name])
                            for name in names if fields.get(name) is not None})


@cache
def _scalar_fields(message_class) -> tuple[tuple, frozenset]:
    """(the names of the non-message fields of ``message_class``, those of its string
    fields): read from its descriptor once, not for each record (some 40 k instructions an
    iteration of ``boundaries --format protobuf``)."""
    fields = message_class.DESCRIPTOR.fields
    return (tuple(f.name for f in fields if f.message_type is None),
            frozenset(f.name for f in fields if f.type == f.TYPE_STRING))


def _utf8(value):
    """A protobuf string must be valid UTF-8: a lone surrogate (legal in JSON, carried through
    by the JSON outputs) becomes U+FFFD here, the one place it cannot be kept."""
    if isinstance(value, str) and not value.isascii():
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


def record_message(record: Boundary | Revision | IterationRecord,
                   trace: str = "") -> pb.Record:
    """The ``Record`` of a boundary, a revision or an iteration (fields from
    ``record.to_dict``: shared, the message copies them)."""
    if isinstance(record, Boundary):
        return pb.Record(trace=trace, boundary=_scalars(pb.Boundary, record.to_dict(True)))
    if isinstance(record, Revision):
        return pb.Record(trace=trace, revision=_scalars(pb.Revision, record.to_dict(True)))
    if isinstance(record, IterationRecord):
        return pb.Record(trace=trace, iteration=iteration_message(record.to_dict(True)))
    raise TypeError(f"not a record: {type(record).__name__}")


def iteration_message(entry: dict) -> pb.Iteration:
    """The ``Iteration`` of an iteration record's dict (or a manifest's entry), its
    ``breakdown`` included."""
    message = _scalars(pb.Iteration, entry)
    breakdown = entry.get("breakdown")
    if breakdown:
        message.breakdown.CopyFrom(_scalars(pb.Breakdown, breakdown))
        message.breakdown.top_kernels.extend(_scalars(pb.KernelTotal, kernel)
                                             for kernel in breakdown.get("top_kernels") or ())
        message.breakdown.host.CopyFrom(_scalars(pb.HostTime, breakdown.get("host") or {}))
    return message


def summary_message(summary: dict) -> pb.Record:
    """The ``Record`` carrying a trace summary (keys as in ``TraceSummary``)."""
    return pb.Record(trace=summary.get("trace") or "",
                     summary=_scalars(pb.TraceSummary, summary))


def manifest_message(manifest: dict) -> pb.Manifest:
    """The ``Manifest`` of a ``write.build_manifest`` dict."""
    message = _scalars(pb.Manifest, manifest)
    # Through JSON, as `explain --json` prints it: Struct takes only JSON types.
    message.detection.update(json.loads(json.dumps(manifest.get("detection") or {},
                                                   default=str)))
    message.counts.CopyFrom(_scalars(pb.Manifest.Counts, manifest.get("counts") or {}))
    message.iterations.extend(iteration_message(entry)
                              for entry in manifest.get("iterations") or ())
    message.outside.CopyFrom(_scalars(pb.Manifest.Outside, manifest.get("outside") or {}))
    return message


def length_prefixed(message) -> bytes:
    """``message`` serialized, preceded by its length as a varint."""
    if _serialize_length_prefixed is None:  # protobuf < 5.27
        return _varint(message.ByteSize()) + message.SerializeToString()
    out = io.BytesIO()
    _serialize_length_prefixed(message, out)
    return out.getvalue()


def read_length_prefixed(stream: BinaryIO) -> Iterator[pb.Record]:
    """The ``Record`` messages of a length-prefixed stream, until its end."""
    while True:
        if _parse_length_prefixed is not None:
            message = _parse_length_prefixed(pb.Record, stream)
        else:
            message = _parse_one(stream)
        if message is None:
            return
        yield message


def _varint(n: int) -> bytes:
    """``n`` (>= 0) as a protobuf varint: 7 bits a byte, low first, the high bit "more"."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _parse_one(stream: BinaryIO) -> pb.Record | None:
    size = shift = 0
    while True:
        byte = stream.read(1)
        if not byte:
            if shift:
                raise ValueError("stream ends inside a length prefix")
            return None
        size |= (byte[0] & 0x7F) << shift
        shift += 7
        if byte[0] < 0x80:
            break
    data = stream.read(size)
    if len(data) != size:
        raise ValueError(f"stream ends inside a message: {len(data)} of {size} bytes")
    return pb.Record.FromString(data)


__all__ = ["Record", "Manifest", "record_message", "summary_message", "manifest_message",
           "length_prefixed", "read_length_prefixed"]
