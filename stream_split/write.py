"""Write stage: per-iteration pieces, the manifest, and record streams.

What this module owns: how an event, a record and a piece look on disk or on a pipe.
- ``PieceWriter``: events arrive in file order, not piece order (a piece's GPU work comes at
  the end of a Kineto file, metadata and trailing header keys may come last of all), so each
  piece's events are spooled as they are decided, on a thread of its own (deflating and
  writing release the GIL, so that is the second core): a piece's first
  ``PACK_PIECE_BYTES`` as they are, into one pack file that all pieces share, the rest
  already compressed, into a spool file of the piece's own. At the end every piece is
  assembled into a complete Chrome trace (header keys, all metadata, its events): its head
  and tail are deflated once for all pieces, its part of the pack deflated (stored, when
  about one event), its spooled segments copied as they are, into one gzip member whose
  CRC32 is combined from the parts'; a small piece is one file creation and one write
  (1 M one-op iterations are 1 M files, not 3 M file operations). Metadata over
  ``METADATA_INLINE_BYTES`` is written once instead, as the piece ``metadata``, and the
  manifest names it. At most ``max_open`` spool
  files and compressors are open at once, and what is kept per piece is a few integers in
  arrays (``_Pack``; its bytes in the pack). A stop requested while the pieces are assembled
  ends the run (``WriteInterrupted``). It writes into a folder of its own (``output.OutputFolder``'s
  staging folder, or a Beam worker's scratch folder): every file is created new, never
  through a link.
- ``build_manifest``: the manifest schema, in one place.
- ``JsonlRecordSink`` / ``ProtobufRecordSink``: boundary and iteration records as lines or as
  varint-length-delimited protobuf messages;
- ``tag_lines``: the ``tag`` stream (every event as a JSON line with its iteration).
An event arrives as its original JSON bytes when the reader had them (written as they came, so
pieces hold the input's bytes) or as a dict (serialized with ``serialize.event_json``).
It decides nothing about owners; it writes what the core decided. ``output`` (files created
new; hashlib) and ``schema`` (protobuf) are loaded where a file is written or a record encoded
so, ``manifest_entries`` and ``analysis`` (the outliers' explanations, from the pieces) where
a manifest is made: ``boundaries`` and ``tag`` need none of them, nor the spool's thread
(``queue``, ``threading``) and ``shutil``, imported where pieces are written (with tempfile,
which ``spill`` and ``pages`` import only when they spill: 13 M instructions of the 594 M of a
``boundaries`` run of two events).
"""
from __future__ import annotations

import os
import struct
import zlib
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Mapping
from contextlib import suppress
from itertools import groupby, takewhile
from operator import itemgetter

import numpy as np
from isal import isal_zlib

import stream_split
from stream_split.errors import WriteInterrupted
from stream_split.pages import reading
from stream_split.serialize import (event_json, record_lines, spaced_json,
                                    walked_finite)
from stream_split.trace_format import ANNOTATION_CAT, PROFILER_STEP_PREFIX
from stream_split.core.records import (
    Boundary, IterationRecord, KIND_IDLE, KIND_ITERATION, METADATA, OUTSIDE)
from stream_split.options import level_used
from stream_split.stats import IterationStats, analyze_records

MANIFEST_FORMAT = "stream-split/manifest"
MANIFEST_VERSION = 1
OUTSIDE_NAME = "outside"
#: The piece that holds the metadata events once, where they are too big to copy into each.
METADATA_NAME = "metadata"
#: Metadata events of at most this many bytes in all (the process and thread names of a real
#: trace: a few kilobytes) are copied into every piece, so that each piece opens alone with
#: its tracks named. More (1 MB of metadata copied into 300 pieces is 300 MB) is written
#: once, to ``metadata.json.gz``, which the manifest names (``metadata.file``); the pieces
#: then hold none.
METADATA_INLINE_BYTES = 1 << 16


def header_entry(key: str, value) -> bytes:
    """One header key as Kineto writes it: on a line of its own, ``"key": value`` with a space
    after every colon and comma (``"distributedInfo": {"backend": "nccl", "rank": 3, ...}``).
    Tools read the header with regular expressions on the file's lines: HTA finds a trace's
    rank with ``"rank":\\s+(\\d+)``, so ``"rank":3`` would make every piece rank 0."""
    return b"  " + spaced_json(key) + b": " + spaced_json(value)


#: Where pieces go: ``flat`` beside the manifest, or ``hta``: ``iteration_<k>/rank<r>.json.gz``,
#: one folder per iteration holding every rank's piece of it and nothing else, the form
#: Holistic Trace Analysis reads (``TraceAnalysis(trace_dir="OUT/iteration_<k>")``); the
#: events outside every iteration stay beside the manifest.
LAYOUTS = ("flat", "hta")
LAYOUT_HTA = "hta"
#: What marks what the hta layout adds to a piece (a rank, a ``ProfilerStep`` span).
ADDED_BY = "stream-split --layout hta"


def hta_additions(header_before: dict, header_after: dict, rank: int | None) -> tuple:
    """``(header_before, rank)`` of a piece in the hta layout: the header with a
    ``distributedInfo`` naming ``rank`` (0 without one) added when the trace has none (HTA
    reads a piece's rank from it), and the rank its pieces are named by."""
    info = header_before.get("distributedInfo", header_after.get("distributedInfo"))
    known = info.get("rank") if isinstance(info, dict) else None
    if isinstance(known, int) and not isinstance(known, bool):
        return header_before, known
    rank = rank or 0
    return {**header_before, "distributedInfo": {"rank": rank, "added_by": ADDED_BY}}, rank


def added_step(record: IterationRecord, loop_thread) -> bytes:
    """The ``ProfilerStep#<index>`` span over an iteration's CPU window that the hta layout
    adds to a piece of a trace without one (HTA finds iterations by it), marked as added."""
    pid, tid = loop_thread if loop_thread else (0, 0)
    return event_json({"ph": "X", "cat": ANNOTATION_CAT,
                       "name": f"{PROFILER_STEP_PREFIX}{record.index}",
                       "pid": pid, "tid": tid, "ts": record.start_ts, "dur": record.duration_us,
                       "args": {"added_by": ADDED_BY}})


#: How pieces are named: by iteration index (``iteration_00003``), or by the ``ProfilerStep``
#: number where the iteration has one (``step_00015``: zero-padded like the index, so the names
#: sort as the steps do up to step 99999). Idle cycles are ``idle_00004`` either way.
NAME_BY = ("index", "step")


def piece_name(index: int, kind: str = KIND_ITERATION, step: int | None = None) -> str:
    """The file name (without suffix) of iteration ``index``'s piece; ``step`` names it by its
    ``ProfilerStep`` number instead."""
    if kind == KIND_IDLE:
        return _BY_INDEX[KIND_IDLE] % index
    if step is not None:
        return f"step_{step:05d}"
    return _BY_INDEX[KIND_ITERATION] % index


#: ``piece_name`` by index, of an iteration and of an idle cycle: what comes before the index,
#: and the digits the index is zero-padded to.
_NAME_HEADS = {KIND_ITERATION: "iteration_", KIND_IDLE: "idle_"}
INDEX_DIGITS = 5
#: ... as ``%`` formats of the index (a quarter fewer instructions than ``str.format``'s
#: ``{:05d}``: two names an iteration).
_BY_INDEX = {kind: f"{head}%0{INDEX_DIGITS}d" for kind, head in _NAME_HEADS.items()}


def _by_owner(pairs) -> dict:
    """{owner: [event, in the order given]} of (owner, event) pairs. Decided events come in
    long runs of one owner (file order): grouped a run at a time."""
    groups = {}
    for owner, run in groupby(pairs, _OWNER):
        events = list(map(_EVENT, run))
        if owner in groups:
            groups[owner].extend(events)
        else:
            groups[owner] = events
    return groups


_OWNER = itemgetter(0)
_EVENT = itemgetter(1)


def _as_bytes(events: list) -> list:
    """Events as JSON bytes (an event given as a dict is serialized)."""
    return [e if e.__class__ is bytes else event_json(e) for e in events]


def _joined_parts(groups, started: bytearray) -> tuple:
    """``(owners, parts, size)`` of ``(owner, events)`` groups (each list of events is
    taken): each owner's events as one part, joined by ``,\n``, with one before them where
    the owner's piece has begun already (``started``, at owner - ``METADATA``: set from now
    on), and the parts' bytes in all (``_native.joined_runs`` does the same for runs of
    pairs)."""
    owners, parts, size = [], [], 0
    for owner, events in groups:
        if _separated(started, owner):
            events.insert(0, b"")
        try:
            data = b",\n".join(events)
        except TypeError:  # events given as dicts
            data = b",\n".join(_as_bytes(events))
        owners.append(owner)
        parts.append(data)
        size += len(data)
    return owners, parts, size


def _separated(started: bytearray, owner: int) -> bool:
    """Whether ``owner``'s piece has begun (``started``, at owner - ``METADATA``); from now on
    it has."""
    at = owner - METADATA
    if at < len(started):
        if started[at]:
            return True
    else:
        started.extend(bytes(at + 1 - len(started)))
    started[at] = 1
    return False


def _merged(owners: list, parts: list) -> tuple:
    """``(owners, parts)`` with one part an owner: its parts joined, in order; the owners
    in the order first seen."""
    groups: dict = {}
    for owner, part in zip(owners, parts):
        if owner in groups:
            groups[owner].append(part)
        else:
            groups[owner] = [part]
    return list(groups), [b"".join(found) for found in groups.values()]


#: Bytes of events gathered (over all pieces) before they are handed to the spool thread as
#: one task: the thread needs the GIL between two zlib calls, so few large tasks, not many
#: small ones; but up to ``SPOOL_QUEUE_TASKS`` + 3 tasks' bytes are held at once (gathered,
#: joined, queued, being deflated): at 1 MB a task, 2-4 MB more peak RSS than at 256 KB
#: (``split``, stripped resnet tiles), for no measured difference in time.
SPOOL_TASK_BYTES = 256 << 10
#: Tasks waiting for the spool thread at most: reading waits when compression falls behind.
SPOOL_QUEUE_TASKS = 2
#: An owner's first bytes of events, up to this many, are spooled to the pack file all owners
#: share (``_Pack``) rather than a file of its own: a piece that small is written from them
#: whole, in one write, and costs one file creation.
PACK_PIECE_BYTES = 64 * 1024
#: The pack file's name in the spool folder (an owner's file is ``<owner>.part``).
PACK_NAME = "pack"
#: Spool files (each with its compressor) open at once, by default: past that, the one
#: written least recently has its segment ended and its file closed. More would seldom keep
#: a segment going, as owners come back after many others: on the 40x stripped resnet tile
#: (122 pieces) 16 open made 715 segments, 4 make 752. Each open one holds a compressor
#: (``_deflater``) and a 64 KB file buffer: 16 held 6.6 MB at the peak RSS.
MAX_OPEN_SPOOLS = 4


class PieceWriter:
    """Spools events per owner (compressed, on a thread of its own) and assembles one
    Chrome-trace file per piece at ``finish``."""

    def __init__(self, out_dir: str, *, compress: bool = True, compresslevel: int = 1,
                 select=None, name_by: str = "index", max_open: int = MAX_OPEN_SPOOLS,
                 layout: str = "flat", rank: int | None = None):
        self.out_dir = out_dir
        self.layout = layout
        #: The rank given by a split of several ranks (``SplitConfig.rank``): its iteration
        #: folders are in the job's folder, the parent of ``out_dir``.
        self.rank = rank
        self._rank_name = rank  # the rank pieces are named by (the header's, once known)
        self.compress = compress
        self.compresslevel = compresslevel
        # callable(index) -> bool, or None for all; what only the end decides (the steady
        # state, step numbers) is the caller's choice of records at ``finish``
        self._select = select
        self.name_by = name_by
        self._spool_dir = os.path.join(out_dir, ".spool")
        os.mkdir(self._spool_dir)
        self._spool = _SpoolThread(self._spool_dir, self.level, max_open)
        self._started = bytearray()  # at owner + 2: 1 once it has events spooled
        # Parts not yet handed to the spool thread, in the order they came: their owners and
        # their bytes (an owner may have several: ``_hand_over`` joins them)
        self._pending_owners: list = []
        self._pending_parts: list = []
        self._pending_size = 0
        #: The metadata events while they are small enough to copy into every piece
        #: (``METADATA_INLINE_BYTES``); past that, spooled to a piece of their own.
        self.metadata: list[bytes] = []
        self._metadata_size = 0
        self.metadata_apart = False
        self.suffix = ".json.gz" if compress else ".json"

    def file_for(self, record: IterationRecord | None) -> str:
        """The piece's file name: of ``record``, or of the events outside (None)."""
        if record is None:
            return OUTSIDE_NAME + self.suffix
        step = record.step if self.name_by == "step" else None
        if self.layout == LAYOUT_HTA:
            root = "../" if self.rank is not None else ""
            return f"{root}{piece_name(record.index, record.kind)}/rank{self._rank_name}{self.suffix}"
        return piece_name(record.index, record.kind, step) + self.suffix

    def wants(self, owner: int) -> bool:
        return owner == OUTSIDE or self._select is None or self._select(owner)

    def add_many(self, pairs) -> None:
        """A batch of decided events: each owner's run of them joined into one part, pending
        for the spool thread until enough are gathered (``_joined_parts``). Where every
        event is its original bytes and wanted (no selection, no metadata), by
        ``_native.joined_runs`` (no call of Python a run: some 9,000 instructions a piece
        fewer on a split of 30 k one-op iterations, with the spool thread's part of it
        taken a task at a time: ``_SpoolThread._spool_parts``); else grouped here."""
        native = stream_split.decode._native  # (read here: the tests switch it)
        runs = None
        if native is not None and self._select is None and pairs.__class__ is list:
            runs = native.joined_runs(pairs, self._started, METADATA)
        if runs is None:
            runs = self._grouped_parts(pairs)
        owners, parts, size = runs
        self._pending_owners += owners
        self._pending_parts += parts
        self._pending_size += size
        if self._pending_size >= SPOOL_TASK_BYTES:
            self._hand_over()

    def _grouped_parts(self, pairs) -> tuple:
        """``add_many``'s parts where ``_native.joined_runs`` gives none: the metadata
        events kept apart (``_add_metadata``), the owners not wanted left out."""
        groups = _by_owner(pairs)
        if self._select is None and METADATA not in groups:  # most: every group, at once
            return _joined_parts(groups.items(), self._started)
        wanted = []
        for owner, chunk in groups.items():
            if owner == METADATA:
                self._add_metadata(_as_bytes(chunk))
            elif self.wants(owner):
                wanted.append((owner, chunk))
        return _joined_parts(wanted, self._started)

    def separated(self, owner: int) -> bool:
        """Whether ``owner``'s next events need a separator before them (a piece's first
        event has none); from now on they do."""
        return _separated(self._started, owner)

    @property
    def level(self) -> int | None:
        """The deflate level of the spooled segments (None: plain ``.json`` pieces)."""
        return self.compresslevel if self.compress else None

    def add_encoded(self, segments) -> None:
        """Events of pieces already joined (``segment_text``) and encoded (``encode_segment``)
        elsewhere, in order: ``[(owner, encoded, crc32, size)]``, appended to each owner's
        spool as they are (``split --workers``: the workers encode, this process orders)."""
        self._hand_over()
        self._spool.put([(owner, encoded, (crc, size)) for owner, encoded, crc, size in segments])

    def _add_metadata(self, events: list) -> None:
        """Metadata events: kept to copy into every piece while they are small
        (``METADATA_INLINE_BYTES``), else spooled once, as the piece ``metadata``."""
        if not self.metadata_apart:
            self.metadata.extend(events)
            self._metadata_size += sum(map(len, events))
            if self._metadata_size <= METADATA_INLINE_BYTES:
                return
            self.metadata_apart = True
            events, self.metadata = self.metadata, []
        owners, parts, size = _joined_parts(((METADATA, events),), self._started)
        self._pending_owners += owners
        self._pending_parts += parts
        self._pending_size += size

    def _hand_over(self) -> None:
        """The parts pending, one an owner (its parts joined, in the order they came; the
        owners in the order first seen), to the spool thread as one task."""
        owners, parts = self._pending_owners, self._pending_parts
        if owners:
            if len(set(owners)) < len(owners):  # an owner's events came in several runs
                owners, parts = _merged(owners, parts)
            self._spool.put((owners, parts))
        self._pending_owners, self._pending_parts = [], []
        self._pending_size = 0

    def discard(self) -> None:
        """Give up: stop the spool thread and remove what was spooled (nothing assembled)."""
        import shutil
        try:
            self._spool.close()
        finally:
            shutil.rmtree(self._spool_dir, ignore_errors=True)

    def finish(self, records, header_before: dict, header_after: dict,
               loop_thread=None, stop=None, kinds=None) -> dict:
        """Assemble the piece of every wanted iteration of ``records`` (plus outside); returns
        {owner: file name}. ``loop_thread``: ``(pid, tid)`` of the loop, where the hta layout
        puts the ``ProfilerStep`` it adds. ``stop`` (a ``run.StopRequest``) requested:
        ``WriteInterrupted`` within ``STOP_CHECK_PIECES`` pieces. ``kinds``: as
        ``file_names`` takes them."""
        self._hand_over()
        self._spool.close()
        if self.layout == LAYOUT_HTA:
            header_before, self._rank_name = hta_additions(header_before, header_after,
                                                           self.rank)
        files = self.file_names(records, kinds)
        head = _piece_head(header_before, self.metadata)
        tail = _piece_tail(header_before, header_after)
        ends = _Ends(head, head + b",\n" if self.metadata else head, tail, self.compresslevel)
        by_index = {r.index: r for r in records} if self.layout == LAYOUT_HTA else {}
        # Pieces are created by their (relative) names in the folder opened once: the file
        # system does not walk the folder's path again for each of 1 M pieces.
        folder_fd = os.open(self.out_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        native = stream_split.decode._native  # (read here: the tests switch it)
        small = native is not None and self.compress and not by_index
        try:
            for owners, names in files.blocks(STOP_CHECK_PIECES):
                _check_stop(stop)
                at = 0
                while at < len(owners):
                    if small and (done := self._assemble_small(owners, names, at, folder_fd,
                                                               ends)):
                        at += done
                        continue
                    owner, name = owners[at], names[at]
                    at += 1
                    own_ends = ends
                    if owner in by_index:
                        os.makedirs(os.path.dirname(os.path.join(self.out_dir, name)),
                                    exist_ok=True)
                        if by_index[owner].step is None:  # HTA finds an iteration by its step
                            own_head = _piece_head(header_before, self.metadata + [
                                added_step(by_index[owner], loop_thread)])
                            own_ends = _Ends(own_head, own_head + b",\n", tail,
                                             self.compresslevel)
                    self._assemble(name, folder_fd, own_ends, owner)
        finally:
            os.close(folder_fd)
            self._spool.pack.release()
        import shutil
        shutil.rmtree(self._spool_dir, ignore_errors=True)
        return files

    def file_names(self, records, kinds=None) -> "PieceFiles":
        """{owner: file name} of the pieces to write: outside, the metadata's where apart,
        and every wanted record's (``PieceFiles``). ``kinds``: each record's kind, index for
        index (``Splitter.kinds``), where ``records`` are every iteration's: pieces named by
        index are then named without a pass over the records (a long trace's are paged)."""
        files = PieceFiles(self.file_for(None),
                           METADATA_NAME + self.suffix if self.metadata_apart else None,
                           self.suffix)
        by_index = self.name_by != "step" and self.layout != LAYOUT_HTA
        if by_index and kinds is not None and len(kinds) == len(records):
            if self._select is None:  # every one: at once
                files.add_all_by_index(kinds)
                return files
            for index, kind in enumerate(kinds):
                if self.wants(index):
                    files.add_by_index(index, kind)
            return files
        taken = None if by_index else set(files.values())
        for record in reading(records):
            if not self.wants(record.index):
                continue
            if by_index:  # unique by construction, and known from the index and kind
                files.add_by_index(record.index, record.kind)
                continue
            name = self.file_for(record)
            if name in taken:  # a step number seen twice: the index keeps them apart
                name = piece_name(record.index, record.kind) + self.suffix
            taken.add(name)
            files.add_named(record.index, name)
        return files

    def _assemble_small(self, owners: list, names: list, at: int, folder_fd: int,
                        ends: _Ends) -> int:
        """How many of the pieces of ``owners`` (named ``names``) from ``at`` on were
        assembled here, a run at once (0: none; the caller assembles the next one, ``_assemble``): compressed
        pieces whose events are the next parts of the pack, one part each, of at most
        ``STORED_PACK_BYTES`` (a stored block: ``_encode_packed``), without a spool file,
        each written by ``_native.small_pieces`` (what ``_assemble`` writes, byte for byte,
        with no call of Python a piece: some 11,000 instructions a piece of one-op
        iterations, most of ``_assemble``'s own)."""
        owners = owners[at:]
        on_file = self._spool.file_sums
        if on_file:  # (rare with small pieces) those before the first with a spool file
            owners = list(takewhile(lambda owner: owner not in on_file, owners))
        pack = self._spool.pack
        found = pack.next_parts(owners)
        if found is None:
            return 0
        data, sizes = found
        done, used = stream_split.decode._native.small_pieces(
            folder_fd, stream_split.output.CREATE_FLAGS, names[at:at + len(sizes)], data,
            sizes, ends.lead, ends.lead_crc, ends.trail, ends.tail,
            len(ends.head_before_events), STORED_PACK_BYTES)
        pack.taken(done, used)
        return done

    def _assemble(self, name: str, folder_fd: int, ends: _Ends, owner: int) -> None:
        """One piece, ``name`` in the folder open as ``folder_fd``: its head, its events
        (the pack's part of them as they are, then its spool file's, already encoded), the
        tail (``ends``). Compressed, it is one gzip member: the head and the tail are
        deflated once for all pieces, the pack's part encoded here (``_encode_packed``:
        deflated, or stored when tiny), the spool file's by the spool thread in segments
        each ended by a sync flush (the way ``pigz`` joins its blocks), and the trailer's
        CRC32 over all of it is combined from the parts' (the pack's taken here, the spool
        file's kept by the spool thread). A piece without a spool file is written in one
        ``write``."""
        packed = self._spool.pack.parts(owner)
        on_file = self._spool.file_sums.get(owner)
        if packed is None and on_file is None:  # no event
            _write_new(name, folder_fd, [ends.empty_piece(self.compress)])
            return
        packed = packed or b""
        if not self.compress:
            before, after = [ends.head_before_events, packed], [ends.tail]
        else:
            before = [ends.lead]
            if packed:
                before.append(_encode_packed(packed, self.compresslevel))
            # the CRC32 of the head and the pack's part taken on from the head's (no combine)
            crc = isal_zlib.crc32(packed, ends.lead_crc)
            size = len(ends.head_before_events) + len(packed)
            if on_file is not None:
                crc, size = isal_zlib.crc32_combine(crc, *on_file), size + on_file[1]
            after = [ends.trail, ends.trailer(crc, size)]
        if on_file is None:  # no spool file (``file_sums`` holds a sum for every one)
            _write_new(name, folder_fd, before + after)
            return
        with stream_split.output.create_new(name, dir_fd=folder_fd) as out:
            out.write(b"".join(before))
            _copy_file(self._spool.path(owner), out)
            out.write(b"".join(after))


class PieceFiles(Mapping):
    """{owner: file name} of the pieces a ``PieceWriter`` writes, in the order written (the
    events outside, the metadata's piece where apart, then the iterations by index): a
    read-only mapping that keeps one byte per iteration where the name follows from the
    index and the kind (``piece_name``: every flat layout named by index), and the name
    itself only where it does not (``--name-by step``, the hta layout). A dict of 1 M names
    took some 100 MB."""

    _NONE, _ITERATION, _IDLE, _NAMED = 0, 1, 2, 3
    _KINDS = {KIND_ITERATION: _ITERATION, KIND_IDLE: _IDLE}

    def __init__(self, outside: str, metadata: str | None, suffix: str):
        self._special = {OUTSIDE: outside}
        if metadata is not None:
            self._special[METADATA] = metadata
        self._suffix = suffix
        self._codes = bytearray()  # at an iteration's index: how its piece is named
        self._named: dict = {}  # index -> name, where not by index
        #: By code (not ``_NONE``): the name of an iteration's piece from its index, by a
        #: function written in C (``piece_name``'s format, suffixed; or a look-up): no call of
        #: Python per piece named.
        self._namers = {self._ITERATION: (_BY_INDEX[KIND_ITERATION] + suffix).__mod__,
                        self._IDLE: (_BY_INDEX[KIND_IDLE] + suffix).__mod__,
                        self._NAMED: self._named.__getitem__}
        #: By code: what comes before the index in a name (``_run_names``).
        self._heads = {code: _NAME_HEADS[kind] for kind, code in self._KINDS.items()}
        self._count = 0

    def add_by_index(self, index: int, kind: str) -> None:
        """Iteration ``index`` (of ``kind``) has a piece named by its index (``piece_name``)."""
        code = self._KINDS.get(kind)
        if code is None:  # a kind not named apart: its name as ``piece_name`` makes it
            self.add_named(index, piece_name(index, kind) + self._suffix)
        else:
            self._set(index, code)

    def add_all_by_index(self, kinds) -> None:
        """``add_by_index(index, kind)`` of each of ``kinds`` (iterations 0 on, none added
        before): where every kind is named apart (``iteration``, ``idle``), their codes made
        at once, by functions written in C (some 4,500 instructions a piece fewer: split of
        30 k one-op iterations), else one by one."""
        codes = list(map(self._KINDS.get, kinds))
        if self._codes or None in codes:
            for index, kind in enumerate(kinds):
                self.add_by_index(index, kind)
            return
        self._codes = bytearray(codes)
        self._count = len(codes)

    def add_named(self, index: int, name: str) -> None:
        """Iteration ``index`` has a piece named ``name``."""
        self._named[index] = name
        self._set(index, self._NAMED)

    def _set(self, index: int, code: int) -> None:
        codes = self._codes
        if index >= len(codes):
            codes.extend(bytes(index + 1 - len(codes)))
        self._count += not codes[index]
        codes[index] = code

    def __getitem__(self, owner: int) -> str:
        special = self._special.get(owner)
        if special is not None:
            return special
        code = self._codes[owner] if owner in self else self._NONE
        if code == self._NONE:
            raise KeyError(owner)
        return self._name(owner, code)

    def _name(self, index: int, code: int) -> str:
        """The name of iteration ``index``'s piece, named as ``code`` says (not ``_NONE``)."""
        return self._namers[code](index)

    def get(self, owner, default=None):
        """``self[owner]``, or ``default`` where ``owner`` has no piece (a call, not two:
        the manifest asks once per iteration)."""
        if isinstance(owner, int) and 0 <= owner < len(self._codes):  # an iteration's: the
            code = self._codes[owner]  # special owners (outside, metadata) are below 0
            return self._namers[code](owner) if code else default  # ``_name``'s, inline
        return self._special.get(owner, default)

    def names_of(self, owners: list) -> list:
        """``[self.get(owner) for owner in owners]``, by a function written in C where they
        are iterations in a row all named alike (a page of the manifest's entries:
        ``manifest_entries._shared_entries``; no call of Python an entry)."""
        if owners and owners[0].__class__ is int and 0 <= owners[0] \
                and owners[-1] - owners[0] == len(owners) - 1:
            block = self._codes[owners[0]:owners[-1] + 1]
            if len(block) == len(owners) and block[0] and block.count(block[0]) == len(block):
                return self._run_names(block[0], range(owners[0], owners[-1] + 1))
        return list(map(self.get, owners))

    def _run_names(self, code: int, indices: range) -> list:
        """The names of the pieces of ``indices`` (iterations in a row), all named as
        ``code`` says: by ``_native.index_names`` where by index (a tenth of the
        instructions of ``str.__mod__``'s format: some 1,800 a name fewer)."""
        native = stream_split.decode._native  # (read here: the tests switch it)
        head = self._heads.get(code)
        if native is None or head is None:
            return list(map(self._namers[code], indices))
        return native.index_names(head, indices.start, len(indices), INDEX_DIGITS,
                                  self._suffix)

    def items(self):
        """(owner, name) of every piece, in order (made as iterated: ``chunks``)."""
        for chunk in self.chunks(STOP_CHECK_PIECES):
            yield from chunk

    def chunks(self, size: int):
        """``items()`` as lists of at most ``size`` (none empty), made as iterated
        (``blocks``, paired)."""
        for owners, names in self.blocks(size):
            yield list(zip(owners, names))

    def blocks(self, size: int):
        """The pieces in order as ``(owners, names)``, two lists of at most ``size`` (none
        empty), made as iterated: the special owners' pieces, then the iterations' from
        ``size`` indices at a time, named by functions written in C where all of them are
        named alike (every piece named by index, where all are iterations: no call of
        Python a piece, ``_run_names``)."""
        if self._special:
            yield list(self._special), list(self._special.values())
        codes, namers = self._codes, self._namers
        for at in range(0, len(codes), size):
            block = codes[at:at + size]
            code = block[0]
            if code and block.count(code) == len(block):
                indices = range(at, at + len(block))
                yield list(indices), self._run_names(code, indices)
            elif owners := [index for index, code in enumerate(block, at) if code]:
                yield owners, [namers[codes[owner]](owner) for owner in owners]

    def __contains__(self, owner) -> bool:
        if owner in self._special:
            return True
        return (isinstance(owner, int) and 0 <= owner < len(self._codes)
                and self._codes[owner] != self._NONE)

    def __iter__(self):
        yield from self._special
        for index, code in enumerate(self._codes):
            if code:
                yield index

    def __len__(self) -> int:
        return len(self._special) + self._count


#: Pieces assembled between two looks at a stop request (a few milliseconds of work).
STOP_CHECK_PIECES = 64


def _check_stop(stop) -> None:
    """``WriteInterrupted`` when ``stop`` (a ``run.StopRequest`` or None) was requested."""
    if stop is not None and stop.requested:
        raise WriteInterrupted()


def _write_new(name: str, folder_fd: int, parts: list) -> None:
    """A new file ``name`` in the folder open as ``folder_fd`` (never through a link)
    holding ``parts``, written in one call."""
    fd = os.open(name, stream_split.output.CREATE_FLAGS, 0o666, dir_fd=folder_fd)
    try:
        data = b"".join(parts)
        written = os.write(fd, data)
        if written < len(data):  # a short write (rare): the rest, without copies
            data = memoryview(data)[written:]
            while data:
                data = data[os.write(fd, data):]
    finally:
        os.close(fd)


class _Ends:
    """What every piece begins and ends with (``_piece_head`` / ``_piece_tail``), and what
    a compressed piece is made of around its events, computed once for all pieces (1 M
    pieces of one event each would otherwise deflate 1 M copies of the same head): ``lead``
    (the gzip header and the head deflated up to a sync flush), ``lead_crc`` (the CRC32 of
    the head, which a piece's events' CRC32 is taken on from), ``trail`` (the tail deflated
    to the end of the stream) and ``trailer(crc, size)`` (the member's CRC32 and size)."""

    def __init__(self, head: bytes, head_before_events: bytes, tail: bytes, level: int):
        self.head = head  # of a piece with no events
        self.head_before_events = head_before_events  # with the separator after metadata
        self.tail = tail
        self._level = level
        self.lead = _gzip_header(level) + _deflate(head_before_events, level, zlib.Z_SYNC_FLUSH)
        self.trail = _deflate(tail, level, zlib.Z_FINISH)
        self.lead_crc, self._tail_crc = isal_zlib.crc32(head_before_events), isal_zlib.crc32(tail)
        self._tail_taken_on = len(tail) <= _CRC_TAIL_BYTES  # (``trailer``)

    def empty_piece(self, compress: bool) -> bytes:
        """The whole piece of no events: its head and tail (rare: made when asked)."""
        if not compress:
            return self.head + self.tail
        return b"".join([_gzip_header(self._level),
                         _deflate(self.head, self._level, zlib.Z_SYNC_FLUSH), self.trail,
                         self.trailer(isal_zlib.crc32(self.head), len(self.head))])

    def trailer(self, crc: int, size: int) -> bytes:
        """The gzip trailer of a piece whose bytes before the tail have ``crc`` and ``size``.
        A short tail's CRC32 is taken on from ``crc`` (a few dozen bytes: cheaper than
        ``crc32_combine``, the same number)."""
        tail = self.tail
        if self._tail_taken_on:
            crc = isal_zlib.crc32(tail, crc)
        else:
            crc = isal_zlib.crc32_combine(crc, self._tail_crc, len(tail))
        return _TRAILER(crc, (size + len(tail)) & 0xFFFFFFFF)


#: A piece's tail up to this many bytes has its CRC32 taken on, not combined (``_Ends``).
_CRC_TAIL_BYTES = 1024
#: A gzip trailer: the CRC32 and the size (modulo 2**32) of what the member holds.
_TRAILER = struct.Struct("<II").pack


def _piece_head(header_before: dict, metadata: list) -> bytes:
    """A piece up to its own events: ``{``, the header keys before the events, the opening of
    ``traceEvents`` and every metadata event."""
    return b"".join([b"{\n", *(header_entry(key, value) + b",\n"
                               for key, value in header_before.items()),
                     b'  "traceEvents": [\n', b",\n".join(metadata)])


def _piece_tail(header_before: dict, header_after: dict) -> bytes:
    """A piece after its events: the end of ``traceEvents``, the header keys after it."""
    return b"".join([b"\n]", *(b",\n" + header_entry(key, value)
                              for key, value in header_after.items()
                              if key not in header_before), b"\n}\n"])


class _SpoolThread:
    """Appends each owner's events to the spool, deflated when ``level`` is set, on a thread
    of its own: deflate (ISA-L's or zlib's), crc32 and file writes release the GIL, so this
    runs on the second core while the main thread reads.

    An owner's first ``PACK_PIECE_BYTES`` go, as they are, to the one pack file that all
    owners share (``pack``: where each owner's parts lie in it); a piece that small is
    deflated whole when it is assembled, and costs no file of its own (a trace of 1 M
    one-op iterations would otherwise create and delete 1 M spool files). Past that, an
    owner's events go to a spool file of its own (``<owner>.part``): a series of
    raw-deflate segments, each from a compressor of its own and ended by ``Z_SYNC_FLUSH``
    (byte-aligned, not final): a compressor's segment ends when it is closed to keep at most
    ``max_open`` of them (and their files) open, or at the end. What is kept per owner is
    the size of its bytes in the pack (an int32: ``PACK_PIECE_BYTES`` at most; ``_ON_FILE``
    once its events go to a file), and for an owner with a spool file (``file_sums``) the
    CRC32 and the size of its uncompressed bytes there; per part in the pack, two int32
    (``_Pack``). The pack's part of an owner's CRC32 is taken as the piece is assembled (the
    pack is read then anyway): a dozen bytes less a piece.
    A task's parts (``PieceWriter._hand_over``: one an owner) are sorted between the pack
    and the files at once, in numpy (``_spool_parts``), not a part at a time."""

    def __init__(self, spool_dir: str, level: int | None, max_open: int):
        self._dir = spool_dir
        self._level = level
        self._max_open = max_open
        self._open: OrderedDict = OrderedDict()  # owner -> (file, compressor or None)
        self._packed = np.zeros(0, dtype=np.int32)  # at owner + 2: its bytes in the pack so far
        #: Owner -> (crc32, size) of its uncompressed bytes in its spool file.
        self.file_sums: dict = {}
        self._on_file: set = set()  # owners whose events past the pack go to a file
        self._made: set = set()  # owners whose spool file exists
        self.pack = _Pack(os.path.join(spool_dir, PACK_NAME))
        import queue  # here, as threading and shutil: only pieces need them (module doc)
        self._tasks: queue.Queue = queue.Queue(SPOOL_QUEUE_TASKS)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def path(self, owner: int) -> str | None:
        """The spool file of ``owner``'s events past the pack, None when it has none."""
        return os.path.join(self._dir, f"{owner}.part") if owner in self._on_file else None

    def put(self, task) -> None:
        """Spool ``(owners, parts)`` (one part an owner: its events as they are), or
        ``[(owner, encoded, (crc32, size))]`` (``PieceWriter.add_encoded``); raises what went
        wrong on the thread before."""
        self._raise_error()
        if self._thread is None:  # started on the first task: nothing to stop when none came
            import threading
            self._thread = threading.Thread(target=self._run, name="stream-split spool",
                                            daemon=True)
            self._thread.start()
        self._tasks.put(task)

    def close(self) -> None:
        """Spool what was put and end every segment."""
        if self._thread is not None:
            self._tasks.put(None)
            self._thread.join()
            self._thread = None
        self._raise_error()

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _run(self) -> None:
        task = ()
        try:
            while (task := self._tasks.get()) is not None:
                if task.__class__ is tuple:  # (owners, parts): events as they came
                    self._spool_parts(*task)
                else:  # segments encoded elsewhere
                    for owner, data, sums in task:
                        self._append_encoded(owner, data, sums)
            self.pack.close()
            while self._open:
                self._end_segment(*self._open.popitem(last=False))
        except BaseException as e:  # handed to the main thread at its next put or close
            self._error = e
            for handle, _ in self._open.values():
                with suppress(OSError):
                    handle.close()
            self._open.clear()
            self.pack.close()
            while task is not None:  # release a main thread blocked on a full queue
                task = self._tasks.get()

    def _spool_parts(self, owners: list, parts: list) -> None:
        """Parts of ``owners`` (one each): to the pack, where each owner's bytes there stay
        within ``PACK_PIECE_BYTES``, in one write; the others, in order, to their owners'
        spool files (and so all of an owner's later events: ``_ON_FILE``). A part at a time
        this was some 11,000 instructions a piece of one-op iterations (a call of
        ``_write``, two array appends a part in ``_Pack.append``)."""
        lengths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
        at = np.array(owners, dtype=np.int64) - METADATA
        sizes = self._sizes(int(at.max()) + 1)
        after = sizes[at] + lengths
        fits = after <= PACK_PIECE_BYTES
        if fits.all():
            sizes[at] = after
            self.pack.append(at + METADATA, lengths, b"".join(parts))
            return
        packed = np.flatnonzero(fits)
        sizes[at[packed]] = after[packed]
        self.pack.append(at[packed] + METADATA, lengths[packed],
                         b"".join([parts[k] for k in packed.tolist()]))
        for k in np.flatnonzero(~fits).tolist():
            self._to_file(owners[k], parts[k])

    def _sizes(self, count: int):
        """``_packed``, holding at least ``count`` owners (zeros added, doubling)."""
        if count > len(self._packed):
            grown = np.zeros(max(count, 2 * len(self._packed)), dtype=np.int32)
            grown[:len(self._packed)] = self._packed
            self._packed = grown
        return self._packed

    def _going_to_file(self, owner: int) -> None:
        """From now on ``owner``'s events go to its spool file, none to the pack."""
        self._on_file.add(owner)
        self._sizes(owner - METADATA + 1)[owner - METADATA] = _ON_FILE

    def _to_file(self, owner: int, data: bytes) -> None:
        """``data`` appended to ``owner``'s spool file (deflated where ``level`` is set)."""
        if owner not in self._on_file:
            self._going_to_file(owner)
        self._add_file_sums(owner, isal_zlib.crc32(data), len(data))
        entry = self._open.get(owner)
        if entry is None:
            if len(self._open) >= self._max_open:
                self._end_segment(*self._open.popitem(last=False))
            entry = self._open[owner] = self._open_segment(owner)
        else:
            self._open.move_to_end(owner)
        handle, compressor = entry
        handle.write(compressor.compress(data) if compressor is not None else data)

    def _append_encoded(self, owner: int, data: bytes, sums: tuple) -> None:
        """Bytes encoded elsewhere (``encode_segment``: whole segments, each ended by a sync
        flush), appended to ``owner``'s spool after its open segment is ended."""
        if owner not in self._on_file:
            self._going_to_file(owner)
        entry = self._open.get(owner)
        if entry is None or entry[1] is not None:
            if entry is not None:
                self._end_segment(owner, self._open.pop(owner))
            elif len(self._open) >= self._max_open:
                self._end_segment(*self._open.popitem(last=False))
            entry = self._open[owner] = (self._open_segment(owner)[0], None)
        else:
            self._open.move_to_end(owner)
        self._add_file_sums(owner, *sums)
        entry[0].write(data)

    def _add_file_sums(self, owner: int, crc: int, size: int) -> None:
        """``owner``'s spool file goes on with bytes of this (crc32, size)."""
        was = self.file_sums.get(owner)
        self.file_sums[owner] = (crc, size) if was is None else (
            isal_zlib.crc32_combine(was[0], crc, size), was[1] + size)

    def _open_segment(self, owner: int):
        path = self.path(owner)
        if owner in self._made:  # reopened after ``max_open`` others: append, never via a link
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
            handle = open(fd, "ab", buffering=64 * 1024)
        else:
            handle = stream_split.output.create_new(path, "ab", buffering=64 * 1024)
            self._made.add(owner)
        return handle, _deflater(self._level) if self._level is not None else None

    @staticmethod
    def _end_segment(owner, entry) -> None:
        handle, compressor = entry
        with handle:
            if compressor is not None:
                handle.write(compressor.flush(zlib.Z_SYNC_FLUSH))


#: ``_SpoolThread._packed`` of an owner whose events go to its spool file: more than any part
#: of the pack can take on.
_ON_FILE = PACK_PIECE_BYTES + 1


class _Pack:
    """The pack file: small parts of many owners' events, as they are, one after another,
    and where each lies: its owner and length (two int32 a part, in arrays: a part is at
    most ``PACK_PIECE_BYTES``; its offset is the sum of the lengths before it, summed once
    the pack is closed). ``parts(owner)`` once ``close`` was called (owners asked for in any
    order)."""

    def __init__(self, path: str):
        self._path = path
        self._file = None
        self._owners = array("i")
        self._lengths = array("i")
        #: (owners, offsets, lengths) in owner order once closed; offsets None where the
        #: parts are in owner order in the file already (``_offset``)
        self._sorted = None
        self._next = 0  # where the owner after the one asked for last begins in them
        self._next_offset = 0  # ... and where its first part lies in the file
        self._block_offsets = None  # where every ``_BLOCK_PARTS``-th part lies (parts in order)
        self._fd: int | None = None
        self._block, self._block_at = b"", 0  # the bytes read ahead (``_read``) and where

    def append(self, owners, lengths, data: bytes) -> None:
        """Parts appended, in order: their owners and lengths (numpy integer columns) and
        their bytes, one after another."""
        if not len(owners):
            return
        if self._file is None:
            self._file = stream_split.output.create_new(self._path, "ab", buffering=0)
        self._owners.frombytes(owners.astype(np.int32).tobytes())
        self._lengths.frombytes(lengths.astype(np.int32).tobytes())
        self._file.write(data)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def parts(self, owner: int) -> bytes | None:
        """``owner``'s bytes in the pack, in order (None: it has no part there). Fastest when
        the owners are asked for in increasing order, as ``PieceWriter.finish`` does."""
        if self._index() is None:
            return None
        owners, offsets, lengths = self._sorted
        lo = self._next
        if not (lo < len(owners) and owners[lo] == owner):  # not the next owner in the pack
            lo = bisect_left(owners, owner)
        hi = lo
        while hi < len(owners) and owners[hi] == owner:
            hi += 1
        if hi == lo:
            return None
        if offsets is None:  # in file order: read from the block read ahead
            offset = self._next_offset if lo == self._next else self._offset(lo)
            size = lengths[lo] if hi == lo + 1 else sum(lengths[lo:hi])
            self._next, self._next_offset = hi, offset + size
            return self._read(offset, size)
        found = [os.pread(self._fd, lengths[at], offsets[at]) for at in range(lo, hi)]
        self._next = hi
        return found[0] if len(found) == 1 else b"".join(found)

    def next_parts(self, owners: list):
        """``(their bytes, their sizes)`` of the first of ``owners`` (in increasing order)
        whose parts are the next ones in the pack, in file order (``parts`` asks for them one
        by one), one part each: the parts one after another, and a memoryview of int32 (None
        where the first is not such an owner). ``taken`` says how many were used."""
        if self._index() is None:
            return None
        in_pack, offsets, lengths = self._sorted
        lo = self._next
        if offsets is not None or lo >= len(in_pack) or not owners:
            return None
        count = min(len(owners), len(in_pack) - lo)
        if in_pack[lo:lo + count].tolist() != owners[:count]:
            count = next(at for at, (a, b) in enumerate(zip(in_pack[lo:lo + count], owners))
                         if a != b)
        if count and lo + count < len(in_pack) and in_pack[lo + count] == owners[count - 1]:
            count -= 1  # the last one has another part
        if not count:
            return None
        sizes = lengths[lo:lo + count]
        return self._read(self._next_offset, sum(sizes)), sizes

    def _index(self):
        """``_sorted``, made on first use (``_sort``); None while the pack holds no part."""
        if self._sorted is None:
            if not self._owners:
                return None
            self._sort()
        return self._sorted

    def taken(self, count: int, size: int) -> None:
        """The first ``count`` owners that ``next_parts`` gave (``size`` bytes of parts)
        were assembled: ``parts`` goes on after them."""
        self._next += count
        self._next_offset += size

    def _read(self, offset: int, size: int) -> bytes:
        """``size`` bytes of the pack at ``offset``, out of a block of ``READ_AHEAD`` bytes
        read at once (the pieces' parts are asked for in file order: 1 M one-op pieces are
        a few hundred reads, not 1 M)."""
        at = offset - self._block_at
        if at < 0 or at + size > len(self._block):
            self._block = os.pread(self._fd, max(size, READ_AHEAD), offset)
            self._block_at, at = offset, 0
        return self._block[at:at + size]

    def _offset(self, at: int) -> int:
        """Where part ``at`` lies in the file, its parts in owner order (``_sort``)."""
        lengths = self._sorted[2]
        block = at // _BLOCK_PARTS
        return int(self._block_offsets[block]) + sum(lengths[block * _BLOCK_PARTS:at])

    def _sort(self) -> None:
        """The parts in owner order (numpy columns, read through memoryviews: an item is a
        Python integer, not a numpy scalar, a few times cheaper to compare and to pass on),
        and the pack opened for reading. Parts already in owner order in the file (each
        owner's events decided in order: a loop on the CPU alone) stay where they are, their
        offsets summed as they are read (and a block's at a time for a look-up out of
        order): 8 bytes a part, no more, where sorting takes up to 40 (1 M one-op pieces)."""
        owners = np.frombuffer(self._owners, dtype=np.int32)
        lengths = np.frombuffer(self._lengths, dtype=np.int32)
        if (owners[1:] >= owners[:-1]).all():
            blocks = np.add.reduceat(lengths, np.arange(0, len(lengths), _BLOCK_PARTS),
                                     dtype=np.int64)
            self._block_offsets = np.zeros(len(blocks), dtype=np.int64)
            np.cumsum(blocks[:-1], out=self._block_offsets[1:])
            self._sorted = (memoryview(owners), None, memoryview(lengths))
        else:
            offsets = np.zeros(len(lengths), dtype=np.int64)
            np.cumsum(lengths[:-1], dtype=np.int64, out=offsets[1:])
            order = np.argsort(owners, kind="stable")
            # numpy columns (their items are integers to ``bisect``, ``os.pread``), each made
            # once: 16 bytes a part, at most 40 while sorting
            self._sorted = (memoryview(owners[order]), memoryview(offsets[order]),
                            memoryview(lengths[order]))
        self._owners, self._lengths = array("i"), array("i")
        self._next = self._next_offset = 0
        self._fd = os.open(self._path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)

    def release(self) -> None:
        """Give the pack's file and index back."""
        self.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._sorted = self._block_offsets = None
        self._block = b""
        self._owners, self._lengths = array("i"), array("i")


#: Parts of the pack whose offset ``_Pack`` keeps, one in so many, where the parts are in
#: owner order in the file.
_BLOCK_PARTS = 1024
#: Bytes of the pack read at once where its parts are read in file order (``_Pack._read``).
READ_AHEAD = 1 << 20


#: ISA-L's memory level of a level-1 compressor: 2 gives it ISA-L's "small" level buffer
#: (hash table and pending tokens), 164 KB a compressor instead of the default's 356 KB; on
#: the resnet trace's JSON it deflates as fast (8.7 against 8.5 ms for 15 MB of it, best of
#: 7) into no more (10.62x against 10.60x).
ISAL_MEM_LEVEL = 2


def _deflater(level: int):
    """A raw-deflate compressor (no gzip header or trailer of its own). Level 1, the default,
    is ISA-L's: on the resnet trace's JSON it deflates about 4x as fast as zlib's level 1
    (955 against 215 MB/s on one core here) into slightly less (10.7x against 10.1x). The
    other levels are zlib's (ISA-L has no match for them)."""
    if level == 1:
        return isal_zlib.compressobj(1, zlib.DEFLATED, -zlib.MAX_WBITS, ISAL_MEM_LEVEL)
    return zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)


def _deflate(data: bytes, level: int, mode: int) -> bytes:
    compressor = _deflater(level)
    return compressor.compress(data) + compressor.flush(mode)


#: A piece's part of the pack of at most this many bytes (a few small events: a one-op
#: iteration's is 77, an annotated step of one op's 168) is written as a stored deflate
#: block, as it is, rather than deflated: deflating it saves some bytes (stored 82 and 173
#: bytes, deflated 74 and 112; at most a few hundred, within the file system block that a
#: piece takes anyway) for some 40,000 to 50,000 instructions, most of them ISA-L's Huffman
#: tables for the one small block (``_encode_packed``). It was 128 (one event) until
#: 2026-12-05: split of 30 k annotated one-op steps (``attacks.many_iterations``) then took
#: 13,618.5 M instructions, 12,180.7 M with 512 (-10.6 %).
STORED_PACK_BYTES = 512


def _encode_packed(data: bytes, level: int) -> bytes:
    """A piece's part of the pack as its deflate segment (ended byte-aligned and not final,
    as a sync flush ends one): deflated at ``level``, or, at most ``STORED_PACK_BYTES``, one
    stored block (a byte of block header, its length and the length's complement, the
    bytes)."""
    size = len(data)
    if size > STORED_PACK_BYTES:
        return _deflate(data, level, zlib.Z_SYNC_FLUSH)
    return _STORED_HEAD(0, size, size ^ 0xFFFF) + data


#: A stored deflate block's head: a byte (not final, stored), its length and its complement.
_STORED_HEAD = struct.Struct("<BHH").pack


def segment_text(raws: list, separated: bool) -> bytes:
    """Events' original bytes as a piece holds them: joined by ``,\\n``, with one before them
    when ``separated`` (``PieceWriter.separated``): an empty first item, not the joined bytes
    copied again behind it (a worker of ``split --workers 2`` on the 10x stripped resnet tile
    copied 76 M instructions' worth so)."""
    if not separated:
        return b",\n".join(raws)
    return b",\n".join([b"", *raws]) if raws else b",\n"


def encode_segment(data: bytes, level: int | None) -> tuple:
    """``(encoded, crc32, size)`` of a segment of a piece's events: deflated at ``level`` and
    ended by a sync flush, as the spool thread ends its segments (None: plain), for
    ``PieceWriter.add_encoded``."""
    encoded = data if level is None else _deflate(data, level, zlib.Z_SYNC_FLUSH)
    return encoded, isal_zlib.crc32(data), len(data)


def _gzip_header(level: int) -> bytes:
    """A gzip member's header: deflate, no name, no time (pieces of one input are the same
    bytes every run), the level hint gzip writes, unknown OS."""
    hint = b"\x04" if level == 1 else b"\x02" if level == 9 else b"\x00"
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00" + hint + b"\xff"


#: Bytes copied at a time from a spool file into its piece.
COPY_CHUNK = 1 << 20


def _copy_file(path: str, out) -> None:
    import shutil
    with open(path, "rb") as src:
        shutil.copyfileobj(src, out, COPY_CHUNK)


def tag_lines(pairs) -> bytes:
    """The ``tag`` stream's lines for decided (owner, event) pairs: ``{"iteration": N or null,
    "piece": name, "event": EVENT}`` (``tag_parts``, joined)."""
    return b"".join(tag_parts(pairs))


def tag_parts(pairs) -> list:
    """``tag_lines`` as parts, for a stream's ``writelines`` (a long run's lines are not
    copied once more into one string). An event's original bytes go out as they came, less
    their line breaks (only whitespace between tokens in JSON: a string cannot hold a raw
    one). Decided events come in long runs of one owner (file order): a run's lines are one
    join, its head between two events (``}`` and a line break, then the next line's head),
    after one look for a line break in its events (``memchr`` over them joined: counting the
    lines took 4 instructions a byte, 0.9 G of the resnet 10x tile's ``tag``)."""
    heads: dict = {}
    parts = []
    for owner, run in groupby(pairs, _OWNER):
        head = heads.get(owner)
        if head is None:
            head = heads[owner] = _tag_head(owner)
        bodies = list(map(_EVENT, run))
        try:
            text = b"".join(bodies)
        except TypeError:  # an event given as a dict (its bytes had to change)
            bodies = _as_bytes(bodies)
            text = b"".join(bodies)
        if _LF in text or _CR in text:  # rare: an event written over several lines
            bodies = [body.translate(None, _LINE_BREAKS) for body in bodies]
        parts += (head, (_TAG_END + head).join(bodies), _TAG_END)
    return parts


#: The line breaks taken out of an event's bytes, as bytes and as ``in`` finds one in bytes.
_LINE_BREAKS = b"\r\n"
_LF, _CR = _LINE_BREAKS[1], _LINE_BREAKS[0]


#: What ends a ``tag`` line: the close of its object, a line break.
_TAG_END = b"}\n"


def _tag_head(owner: int) -> bytes:
    """The start of a ``tag`` line of ``owner``'s events, up to the event."""
    if owner == METADATA:
        return b'{"iteration":null,"piece":"metadata","event":'
    if owner == OUTSIDE:
        return b'{"iteration":null,"piece":"' + OUTSIDE_NAME.encode() + b'","event":'
    return (b'{"iteration":' + str(owner).encode() + b',"piece":"'
            + piece_name(owner).encode() + b'","event":')


def build_manifest(*, source: str, splitter, reader_info: dict, files: dict | None,
                   error: str | None = None, selection: dict | None = None,
                   stats: IterationStats | None = None) -> dict:
    """The manifest: what was read, how it was split, and the counts that prove conservation.
    ``selection``: what ``--iterations`` / ``--steps`` chose when only some iterations were
    written (``{"iterations": text, "steps": text, "written": [index, ...]}``); None: all of
    them. Strict JSON: a number that is not finite is None (``serialize.walked_finite``). Its
    ``iterations`` are made from the records when read (``manifest_entries``). ``stats``: the
    records' verdicts (``stats.finish``'s, ``run.RunOutcome.stats``), else judged here."""
    files = files or {}
    if stats is None:
        stats = analyze_records(splitter.iterations)
    iterations = stream_split.manifest_entries.ManifestIterations(splitter.iterations, files)
    written = None if selection is None else set(selection["written"])
    manifest = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "input": source,
        "complete": bool(reader_info.get("complete")) and error is None,
        "stop_reason": error or reader_info.get("stop_reason"),
        "form": reader_info.get("form"),
        "bytes_read": reader_info.get("bytes_read"),
        "detection": splitter.evidence,
        "level": level_used(splitter.options.level, splitter.evidence),
        "steady_state": stats.steady_state,
        **({} if selection is None else {"selection": {
            "iterations": selection.get("iterations"), "steps": selection.get("steps"),
            **{k: selection[k] for k in ("phase", "steady") if k in selection},
            "iterations_written": len(written)}}),
        "counts": _counts(splitter, written, metadata_apart=METADATA in files),
        **({} if METADATA not in files else {"metadata": {
            "file": files[METADATA], "events": splitter.metadata_events,
            "why": f"over {METADATA_INLINE_BYTES} bytes of metadata events: written once, "
                   f"not copied into each piece"}}),
        "iterations": iterations,
        "outside": {"file": files.get(OUTSIDE), "events": splitter.outside_events,
                    "kernels": splitter.outside_kernels},
    }
    return walked_finite(manifest)  # (its ``iterations`` the encoder refuses: no check first)


def _counts(splitter, written: set | None, metadata_apart: bool = False) -> dict:
    """The manifest's ``counts``. ``written``: the indices of the iterations whose pieces were
    written (None: all). The counts of pieces (``events_in_iterations``, ``events_out``) are
    of the pieces written; the events of iterations left out are ``events_not_written`` (only
    with a selection), so ``conserved`` still checks that every event was accounted for.
    ``metadata_apart``: the metadata events are in a piece of their own, in none other."""
    events_in = splitter.events_in
    metadata = splitter.metadata_events
    in_pieces, not_written = splitter.events_in_iterations, 0
    if written is not None or in_pieces is None:  # else summed once the records were final
        in_pieces = 0
        for record in reading(splitter.iterations):
            if written is None or record.index in written:
                in_pieces += record.events
            else:
                not_written += record.events
    out_total = in_pieces + splitter.outside_events
    counts = {
        "events_in": events_in,
        "metadata_events": metadata,
        "non_metadata_in": events_in - metadata,
        "events_in_iterations": in_pieces,
        "events_outside": splitter.outside_events,
        "events_out": out_total,
    }
    if written is not None:
        counts["events_not_written"] = not_written
    counts.update({
        "conserved": out_total + not_written == events_in - metadata,
        "invalid": splitter.invalid_events,
        "invalid_examples": splitter.invalid_examples,
        "metadata_copied_per_piece": 0 if metadata_apart else metadata,
    })
    return counts


def finish_split(writer: PieceWriter, splitter, reader, *, source: str, reader_info: dict,
                 error: str | None, owners=None, chosen_by: dict | None = None,
                 stop=None, stats: IterationStats | None = None, table=None) -> dict:
    """Assemble the pieces (of the iteration indices ``owners``, default all) and write
    ``manifest.json`` beside them; returns the manifest. ``chosen_by``: what chose ``owners``
    (``{"iterations": text, "steps": text}``, ``IterationChoice.texts``). ``stop``: a
    ``run.StopRequest``; requested now (not before: that one ended the reading),
    ``WriteInterrupted`` is raised within ``STOP_CHECK_PIECES`` pieces: a run stopped
    after its input was read ends at once, nothing written. ``stats``: the verdicts on the
    records (``stats.finish``'s), else judged again here. ``table``: a
    ``summary.TableBuilder`` that reads the manifest's entries as they are written.
    The end of every `split` (the CLI's, the library's and the Beam transform's)."""
    if stop is not None and stop.requested:  # before: it ended the reading, already honoured
        stop = None
    chosen = None if owners is None else set(owners)
    records = splitter.iterations if chosen is None else [
        r for r in splitter.iterations if r.index in chosen]
    files = writer.finish(records,
                          reader.header_before if reader is not None else {},
                          reader.header_after if reader is not None else {},
                          loop_thread=splitter.evidence.get("loop_thread"), stop=stop,
                          kinds=splitter.kinds if chosen is None else None)
    selection = None if chosen is None else {**(chosen_by or {}), "written": sorted(chosen)}
    manifest = build_manifest(source=source, splitter=splitter, reader_info=reader_info,
                              files=files, error=error, selection=selection, stats=stats)
    # from the pieces just written
    stream_split.analysis.explain_outliers(writer.out_dir, manifest,
                     outliers=None if stats is None else sorted(stats.reasons))
    _check_stop(stop)
    # Written once, last: a folder holding a manifest holds every piece it names.
    with stream_split.output.create_new(os.path.join(writer.out_dir, "manifest.json"),
                                        "wb") as f:  # (ASCII: ``dump_manifest``)
        if table is not None:
            table.start(manifest)
        stream_split.manifest_entries.dump_manifest(manifest, f,
                                                    None if table is None else table.add_many)
        f.write(b"\n")
    return manifest


class JsonlRecordSink:
    """Records as JSON Lines, flushed as soon as they are written (a reader may be waiting
    on them): one by one (``write``), or those decided together at once (``write_many``,
    ``run.drive``'s ``on_records``: 60 k records of one-op iterations were 60 k flushes)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, record) -> None:
        self.write_many((record,))

    def write_many(self, records) -> None:
        self._stream.write(record_lines(records))
        self._stream.flush()

    def close(self) -> None:
        self._stream.flush()


class ProtobufRecordSink:
    """Records as varint-length-delimited ``stream_split.v1.Record`` messages."""

    def __init__(self, stream, trace: str = ""):
        self._stream = stream
        self._trace = trace

    def write(self, record) -> None:
        self.write_many((record,))

    def write_many(self, records) -> None:
        """As ``JsonlRecordSink.write_many``: one flush for them."""
        schema = stream_split.schema  # protobuf: loaded only where records are encoded so
        trace = self._trace
        self._stream.write(b"".join([schema.length_prefixed(schema.record_message(
            record, trace=trace)) for record in records]))
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
