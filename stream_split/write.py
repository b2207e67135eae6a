"""Write stage: per-iteration pieces, the manifest, and record streams.

What this module owns: how an event, a record and a piece look on disk or on a pipe.
- ``PieceWriter``: events arrive in file order, not piece order (a piece's GPU work comes at
  the end of a Kineto file, metadata and trailing header keys may come last of all), so each
  piece's events are spooled to a temporary file as they are decided, and every piece is
  assembled into a complete Chrome trace (header keys, all metadata, its events) at the end.
  At most ``max_open`` spool files are open at once: memory does not grow with the number
  of pieces. It writes into a folder of its own (``output.OutputFolder``'s staging folder, or
  a Beam worker's scratch folder): every file is created new, never through a link.
- ``build_manifest``: the manifest schema, in one place.
- ``JsonlRecordSink`` / ``ProtobufRecordSink``: boundary and iteration records as lines or as
  varint-length-delimited protobuf messages;
- ``tag_lines``: the ``tag`` stream (every event as a JSON line with its iteration).
An event arrives as its original JSON bytes when the reader had them (written as they came, so
pieces hold the input's bytes) or as a dict (serialized with ``serialize.event_json``).
It decides nothing about owners; it writes what the core decided.
"""
from __future__ import annotations

import gzip
import json
from concurrent.futures import ThreadPoolExecutor
import os
import shutil
from collections import OrderedDict
from itertools import chain, repeat

import numpy as np

from stream_split.output import create_new
from stream_split.serialize import event_json, spaced_json
from stream_split.core.records import (
    Boundary, IterationRecord, KIND_IDLE, KIND_ITERATION, METADATA, OUTSIDE)
from stream_split.options import level_used
from stream_split.stats import analyze_records

MANIFEST_FORMAT = "stream-split/manifest"
MANIFEST_VERSION = 1
OUTSIDE_NAME = "outside"


def header_entry(key: str, value) -> bytes:
    """One header key as Kineto writes it: on a line of its own, ``"key": value`` with a space
    after every colon and comma (``"distributedInfo": {"backend": "nccl", "rank": 3, ...}``).
    Tools read the header with regular expressions on the file's lines: HTA finds a trace's
    rank with ``"rank":\\s+(\\d+)``, so ``"rank":3`` would make every piece rank 0."""
    return b"  " + spaced_json(key) + b": " + spaced_json(value)


#: How pieces are named: by iteration index (``iteration_00003``), or by the ``ProfilerStep``
#: number where the iteration has one (``step_15``). Idle cycles are ``idle_00004`` either way.
NAME_BY = ("index", "step")


def piece_name(index: int, kind: str = KIND_ITERATION, step: int | None = None) -> str:
    """The file name (without suffix) of iteration ``index``'s piece; ``step`` names it by its
    ``ProfilerStep`` number instead."""
    if kind == KIND_IDLE:
        return f"idle_{index:05d}"
    if step is not None:
        return f"step_{step}"
    return f"iteration_{index:05d}"


def _by_owner(pairs) -> dict:
    """{owner: [event bytes, in the order given]} of (owner, event) pairs (an event as a dict
    is serialized)."""
    if not pairs:
        return {}
    owners, events = zip(*pairs)
    if not set(map(type, events)) <= {bytes}:
        events = [e if e.__class__ is bytes else event_json(e) for e in events]
    if len(set(owners)) == 1:
        return {owners[0]: list(events)}
    ids = np.array(owners)
    order = np.argsort(ids, kind="stable")
    groups = np.split(order, np.flatnonzero(np.diff(ids[order])) + 1)
    return {owners[group[0]]: [events[k] for k in group.tolist()] for group in groups}


class PieceWriter:
    """Spools events per owner and assembles one Chrome-trace file per piece at ``finish``."""

    def __init__(self, out_dir: str, *, compress: bool = True, compresslevel: int = 1,
                 select=None, name_by: str = "index", max_open: int = 16):
        self.out_dir = out_dir
        self.compress = compress
        self.compresslevel = compresslevel
        # callable(index) -> bool, or None for all; what only the end decides (the steady
        # state, step numbers) is the caller's choice of records at ``finish``
        self._select = select
        self.name_by = name_by
        self._max_open = max_open
        self._spool_dir = os.path.join(out_dir, ".spool")
        os.mkdir(self._spool_dir)
        self._open: OrderedDict = OrderedDict()
        self._spooled: set = set()  # owners whose spool file exists
        self.metadata: list[bytes] = []
        self.suffix = ".json.gz" if compress else ".json"

    def file_for(self, record: IterationRecord | None) -> str:
        """The piece's file name: of ``record``, or of the events outside (None)."""
        if record is None:
            return OUTSIDE_NAME + self.suffix
        step = record.step if self.name_by == "step" else None
        return piece_name(record.index, record.kind, step) + self.suffix

    def wants(self, owner: int) -> bool:
        return owner == OUTSIDE or self._select is None or self._select(owner)

    def add_many(self, pairs) -> None:
        """A batch of decided events: one write per piece, not one per event."""
        for owner, chunk in _by_owner(pairs).items():
            if owner == METADATA:
                self.metadata.extend(chunk)
                continue
            if not self.wants(owner):
                continue
            handle = self._open.get(owner)
            if handle is None:
                handle = self._open_spool(owner)
            else:
                self._open.move_to_end(owner)
            chunk.append(b"")
            handle.write(b",\n".join(chunk))

    def _spool_path(self, owner: int) -> str:
        return os.path.join(self._spool_dir, f"{owner}.part")

    def _open_spool(self, owner: int):
        if len(self._open) >= self._max_open:
            _, old = self._open.popitem(last=False)
            old.close()
        path = self._spool_path(owner)
        if owner in self._spooled:  # reopened after ``max_open`` others: append, never via a link
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
            handle = open(fd, "ab", buffering=64 * 1024)
        else:
            handle = create_new(path, "ab", buffering=64 * 1024)
            self._spooled.add(owner)
        self._open[owner] = handle
        return handle

    def finish(self, records, header_before: dict, header_after: dict) -> dict:
        """Assemble the piece of every wanted iteration of ``records`` (plus outside); returns
        {owner: file name}."""
        for handle in self._open.values():
            handle.close()
        self._open.clear()
        files = {OUTSIDE: self.file_for(None)}
        taken = set(files.values())
        for record in records:
            if not self.wants(record.index):
                continue
            name = self.file_for(record)
            if name in taken:  # a step number seen twice: the index keeps them apart
                name = piece_name(record.index, record.kind) + self.suffix
            taken.add(name)
            files[record.index] = name
        # zlib releases the GIL: assemble pieces on two threads (two cores).
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(lambda item: self._assemble(
                item[0], os.path.join(self.out_dir, item[1]), header_before, header_after),
                files.items()))
        shutil.rmtree(self._spool_dir, ignore_errors=True)
        return files

    def _assemble(self, owner, path, header_before, header_after) -> None:
        with create_new(path) as raw, (
                gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=self.compresslevel,
                              filename="") if self.compress else raw) as out:
            out.write(b"{\n")
            for key, value in header_before.items():
                out.write(header_entry(key, value) + b",\n")
            out.write(b'  "traceEvents": [\n')
            first = True
            for meta in self.metadata:
                if not first:
                    out.write(b",\n")
                out.write(meta)
                first = False
            if owner in self._spooled:
                with open(self._spool_path(owner), "rb") as src:
                    size = _events_size(src)
                    if size:
                        if not first:
                            out.write(b",\n")
                        first = False
                        _copy(src, out, size)
            out.write(b"\n]")
            for key, value in header_after.items():
                if key in header_before:
                    continue
                out.write(b",\n" + header_entry(key, value))
            out.write(b"\n}\n")


#: Bytes copied at a time from a spool file into its piece.
COPY_CHUNK = 1 << 20


def _events_size(spool) -> int:
    """A spool file holds ``event,\n`` per event: its size less the final separator."""
    size = os.fstat(spool.fileno()).st_size
    if size >= 2:
        spool.seek(size - 2)
        if spool.read(2) == b",\n":
            size -= 2
        spool.seek(0)
    return size


def _copy(src, out, size: int) -> None:
    while size > 0:
        chunk = src.read(min(COPY_CHUNK, size))
        if not chunk:
            raise OSError("spool file shrank while it was copied")
        out.write(chunk)
        size -= len(chunk)


_LINE_BREAKS = b"\r\n"


def tag_lines(pairs) -> bytes:
    """The ``tag`` stream's lines for decided (owner, event) pairs: ``{"iteration": N or null,
    "piece": name, "event": EVENT}``. An event's original bytes go out as they came, less their
    line breaks (only whitespace between tokens in JSON: a string cannot hold a raw one)."""
    if not pairs:
        return b""
    owners, events = zip(*pairs)
    heads = {owner: _tag_head(owner) for owner in set(owners)}
    bodies = [event if event.__class__ is bytes else event_json(event) for event in events]

    def join(bodies: list) -> bytes:
        return b"".join(chain.from_iterable(zip(map(heads.__getitem__, owners), bodies,
                                                repeat(b"}\n"))))
    lines = join(bodies)
    if lines.count(b"\n") == len(bodies) and b"\r" not in lines:
        return lines
    # Rare: an event written over several lines.
    return join([body.translate(None, _LINE_BREAKS) for body in bodies])


def _tag_head(owner: int) -> bytes:
    """The start of a ``tag`` line of ``owner``'s events, up to the event."""
    if owner == METADATA:
        return b'{"iteration":null,"piece":"metadata","event":'
    if owner == OUTSIDE:
        return b'{"iteration":null,"piece":"' + OUTSIDE_NAME.encode() + b'","event":'
    return (b'{"iteration":' + str(owner).encode() + b',"piece":"'
            + piece_name(owner).encode() + b'","event":')


def build_manifest(*, source: str, splitter, reader_info: dict, files: dict | None,
                   error: str | None = None) -> dict:
    """The manifest: what was read, how it was split, and the counts that prove conservation."""
    files = files or {}
    iterations = []
    for record in splitter.iterations:
        entry = record.to_dict()
        entry.pop("type")
        entry["file"] = files.get(record.index)
        iterations.append(entry)
    events_in = splitter.events_in
    metadata = splitter.metadata_events
    in_pieces = sum(r.events for r in splitter.iterations)
    out_total = in_pieces + splitter.outside_events
    return {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "input": source,
        "complete": bool(reader_info.get("complete")) and error is None,
        "stop_reason": error or reader_info.get("stop_reason"),
        "form": reader_info.get("form"),
        "bytes_read": reader_info.get("bytes_read"),
        "detection": splitter.evidence,
        "level": level_used(splitter.options.level, splitter.evidence),
        "steady_state": analyze_records(splitter.iterations).steady_state,
        "counts": {
            "events_in": events_in,
            "metadata_events": metadata,
            "non_metadata_in": events_in - metadata,
            "events_in_iterations": in_pieces,
            "events_outside": splitter.outside_events,
            "events_out": out_total,
            "conserved": out_total == events_in - metadata,
            "invalid": splitter.invalid_events,
            "invalid_examples": splitter.invalid_examples,
            "metadata_copied_per_piece": metadata,
        },
        "iterations": iterations,
        "outside": {"file": files.get(OUTSIDE), "events": splitter.outside_events,
                    "kernels": splitter.outside_kernels},
    }


def finish_split(writer: PieceWriter, splitter, reader, *, source: str, reader_info: dict,
                 error: str | None, owners=None) -> dict:
    """Assemble the pieces (of the iteration indices ``owners``, default all) and write
    ``manifest.json`` beside them; returns the manifest. The end of every `split` (the
    CLI's, the library's and the Beam transform's)."""
    chosen = None if owners is None else set(owners)
    files = writer.finish([r for r in splitter.iterations if chosen is None or r.index in chosen],
                          reader.header_before if reader is not None else {},
                          reader.header_after if reader is not None else {})
    manifest = build_manifest(source=source, splitter=splitter, reader_info=reader_info,
                              files=files, error=error)
    # Written once, last: a folder holding a manifest holds every piece it names.
    with create_new(os.path.join(writer.out_dir, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    return manifest


class JsonlRecordSink:
    """Records as JSON Lines, flushed one by one (a reader may be waiting on them)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, record) -> None:
        self._stream.write(event_json(record.to_dict()) + b"\n")
        self._stream.flush()

    def close(self) -> None:
        self._stream.flush()


class ProtobufRecordSink:
    """Records as varint-length-delimited ``stream_split.v1.Record`` messages."""

    def __init__(self, stream, trace: str = ""):
        from stream_split import schema
        self._schema = schema
        self._stream = stream
        self._trace = trace

    def write(self, record) -> None:
        message = self._schema.record_message(record, trace=self._trace)
        self._stream.write(self._schema.length_prefixed(message))
        self._stream.flush()

    def close(self) -> None:
        self._stream.flush()


def record_sink(fmt: str, stream, trace: str = ""):
    if fmt == "protobuf":
        return ProtobufRecordSink(stream, trace)
    return JsonlRecordSink(stream)


__all__ = ["event_json", "tag_lines", "PieceWriter", "build_manifest", "finish_split",
           "JsonlRecordSink", "ProtobufRecordSink", "record_sink", "Boundary",
           "IterationRecord"]
