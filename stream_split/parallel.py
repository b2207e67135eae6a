"""``split --workers N``: one trace split across N processes, with the output of one stream.

An adapter of ``folder.split_to_folder``, beside the one-stream path; it decides nothing. A
reader process (``_deal``) inflates the file (``decode.Decompressor``: ISA-L) and deals its
JSON text in ranges of about ``RANGE_BYTES``, each cut just after a ``}`` that ``,`` and a line
break follow (as Kineto writes events; a trace with no line breaks is one range), to the
workers in turn. A worker decodes its range with the project's decoder
(``decode.TraceDecoder``, slim, as ``run.drive`` reads), the range made a document of its own
(``[`` ... ``]``, or the trace's own head and tail for the first and last), keeps the events'
original bytes and hands back the compact events the engine reads. This process feeds them to
the one engine (``run.drive``, in file order) with each event's place (``range << RANGE_SHIFT |
index``) instead of its bytes; the decided ``(owner, place)`` pairs are cut into segments (one
owner, one range, in the order decided), which the range's worker joins
(``write.segment_text``) and deflates (``write.encode_segment``); the segments go to each
piece's spool in the order decided (``write.PieceWriter.add_encoded``), and the pieces and the
manifest are assembled as for one stream (``write.finish_split``). So every piece holds the
same events in the same order as with ``--workers 1``, and the manifest is the same.

The ranges' text and what the workers make of it do not go through pipes: they lie in shared
slots (``_Slots``: an anonymous shared file, freed by the system with the last process that
maps it, however the processes end), and only their lengths cross in messages. So this
process does the engine, reads the engine's events back and cuts the segments, and nothing
else takes its interpreter lock but the spool's writes (inflating, dealing and pickling 600 MB
of ranges into pipes were a third of its time on the 40x resnet tile).

A cut is only a guess at an event boundary (a ``},`` may close an object inside an event's
``args``). It is checked where the range is decoded: the ranges tile the events array, and the
first begins at the document's start, so when every range decodes as a complete document each
cut was between two events. When one does not (a wrong guess, an input error, an event whose
bytes had to change, a worker that died), ``NotParallel`` is raised before any piece is
assembled, and the trace is split as one stream (``folder.split_to_folder``): errors and their
messages are that path's.

Only a regular file of the object or array form, plain or gzip, takes this path: a pipe
cannot be read twice nor dealt ahead, and a followed file grows while it is read (both stay
one stream, as do JSON Lines and zstd). Each worker holds its ranges' undecided events' bytes
(freed as they are written) and one range in decoding, and the slots are ``AHEAD_PER_WORKER``
ranges per worker: no process's memory grows with the trace.
"""
from __future__ import annotations

import mmap
import multiprocessing
import os
import pickle
import queue
import signal
import threading
from itertools import repeat
from multiprocessing.reduction import DupFd
from operator import itemgetter
from typing import Union

import msgspec
import numpy as np
from msgspec.structs import astuple, fields

import stream_split.decode
from stream_split.core.records import METADATA
from stream_split.core.validate import SlimEvent
from stream_split.decode import Decompressor, Events, TraceDecoder
from stream_split.errors import TraceInputError
from stream_split.run import STOP_SIGNALS
from stream_split.trace_format import METADATA_PHASE
from stream_split.write import encode_segment, segment_text

__all__ = ["NotParallel", "ParallelSplit", "takes_parallel_path", "takes_ranges", "placed",
           "cut_ranges", "range_document", "decode_range", "decode_for_engine", "DecodedRanges",
           "cut_segments", "EventRow",
           "RANGE_BYTES", "RANGE_SHIFT"]

#: Bytes of JSON text per range dealt (the first cut after this many).
RANGE_BYTES = 4 << 20
#: Files smaller than this on disk are split as one stream (starting workers costs more).
PARALLEL_MIN_BYTES = 8 << 20
#: Bytes read from the file at a time.
READ_CHUNK = 1 << 20
#: Ranges dealt to each worker ahead of the engine (each in a slot of its own: ``_Slots``).
AHEAD_PER_WORKER = 2
#: A slot holds this many ``RANGE_BYTES`` (a range is a little longer than ``RANGE_BYTES``;
#: what a worker makes of it, pickled, was at most 1.09x its text on the 10x resnet tile).
_SLOT_RANGES = 2
#: Decided events gathered before their segments are sent to the workers.
ROUND_PAIRS = 1 << 16
#: Rounds of segments sent and not yet spooled, at most.
ROUNDS_AHEAD = 8
#: A range's list of event bytes is made a dict of those left once fewer than 1 in this
#: many are left (its list would otherwise stay as long as one of them waits).
_COMPACT_BELOW = 8
#: An event's place: its range shifted by this, or'ed with its index in the range.
RANGE_SHIFT = 32
_INDEX_MASK = (1 << RANGE_SHIFT) - 1
#: The owner and the place of a decided ``(owner, place)`` pair.
_OWNER, _PLACE = itemgetter(0), itemgetter(1)
#: Seconds between two looks at whether the workers are alive while waiting for them.
_POLL_S = 1.0
_FORMS = ("object", "array")
_OPENERS = {"object": b'{"traceEvents": [', "array": b"["}
_CLOSERS = {"object": b"]}", "array": b"]"}
_FIRST, _MIDDLE, _LAST, _ONLY = "first", "middle", "last", "only"
#: Where a range is cut (after its ``}``): a line break is never inside a JSON string, so
#: neither is the ``},`` before it (an event's ``args`` may still hold one: see above).
_CUT = b"},\n"
_ENCODER = msgspec.json.Encoder()
#: A checked slim event as it crosses to the engine's process: ``SlimEvent``'s fields, of its
#: types (checked again as read back), its ``get``, written as a JSON array of its fields
#: (``array_like``: read back without matching a key a field; see ``decode_for_engine``).
EventRow = msgspec.defstruct(
    "EventRow", [(f.name, f.type, f.default) for f in fields(SlimEvent)],
    namespace={"get": SlimEvent.get}, module=__name__, gc=False, array_like=True)
#: A range's events read back, by whether they are ``checked``: ``EventRow`` (a frame run
#: read in bulk holds None), or dicts.
_EVENTS = {True: msgspec.json.Decoder(list[Union[EventRow, None]]),
           False: msgspec.json.Decoder()}


class NotParallel(Exception):
    """This trace cannot be split in ranges after all: split it as one stream."""


def takes_parallel_path(source, reader, workers: int, follow) -> bool:
    """Whether ``source`` (opened as ``reader``, up to its first event) is split by
    ``workers`` processes (see the module docstring)."""
    return (workers > 1 and follow is None and hasattr(os, "memfd_create")  # (``_Slots``)
            and isinstance(source, (str, os.PathLike))
            and source != "-" and os.path.isfile(source)
            and os.path.getsize(source) >= PARALLEL_MIN_BYTES and takes_ranges(reader))


def takes_ranges(reader) -> bool:
    """Whether a trace opened as ``reader`` (up to its first event) can be cut in ranges
    (``cut_ranges``): of the object or array form, plain or gzip."""
    return reader.form in _FORMS and reader.compression in ("gzip", "plain")


def placed(texts):
    """Each range with its place: the first, the last, one of the middle, or the only one."""
    previous, first = None, True
    for text in texts:
        if previous is not None:
            yield previous, _FIRST if first else _MIDDLE
            first = False
        previous = text
    if previous is not None:
        yield previous, _ONLY if first else _LAST


def cut_ranges(stream, range_bytes: int, on_read=None, head_bytes: int = 0):
    """The JSON text of the trace read from the binary ``stream`` (from its start), inflated,
    cut after a ``}`` before ``,\\n`` (``_CUT``), once at least ``range_bytes`` are gathered
    (the first range: ``head_bytes`` too, the bytes the reader took to its first event,
    header keys included); ``on_read(n)``: n bytes of the stream were read. ``NotParallel``
    when the stream cannot be read or is cut short."""
    decompressor = Decompressor()
    parts, size = [], 0
    least = max(range_bytes, head_bytes)
    try:
        while chunk := stream.read(READ_CHUNK):
            if on_read is not None:
                on_read(len(chunk))
            for plain in decompressor.pieces(chunk):
                parts.append(plain)
                size += len(plain)
                if size > least:
                    text = b"".join(parts)
                    start = 0
                    while (cut := text.find(_CUT, start + least)) >= 0:
                        yield text[start:cut + 1]
                        start, least = cut + 1, range_bytes
                    parts, size = [text[start:]], len(text) - start
        parts.append(decompressor.finish())
    except (TraceInputError, OSError) as e:
        raise NotParallel(str(e)) from None
    if decompressor.truncated:
        raise NotParallel("the compressed stream is cut short")
    yield b"".join(parts)


def _file_ranges(path, range_bytes: int, on_read=None, head_bytes: int = 0):
    """``cut_ranges`` of the file at ``path``."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise NotParallel(str(e)) from None
    with f:
        yield from cut_ranges(f, range_bytes, on_read, head_bytes)


def range_document(text: bytes, place: str, form: str) -> list:
    """The parts of a range that make it a document of its own, joined (``b"".join``):
    ``[`` ... ``]``, or the trace's own head and tail for the first and last range;
    ``NotParallel`` when a range after the first does not begin after an event."""
    parts = [text]
    if place in (_MIDDLE, _LAST):
        if text[:1] != b",":
            raise NotParallel("a range does not begin after an event")
        parts = [_OPENERS[form], memoryview(text)[1:]]
    if place in (_FIRST, _MIDDLE):
        parts.append(_CLOSERS[form])
    return parts


def decode_range(document: bytes, place: str, form: str, max_event_bytes: int) -> tuple:
    """``(events, ending)`` of one range made a document (``range_document``): the events
    with their original bytes, as a slim ``Events`` batch, and for the last range the
    document's ``(header_after, stop_reason)`` (else None); ``NotParallel`` when the range is
    not a run of whole events (see the module docstring)."""
    decoder = TraceDecoder(max_event_bytes=max_event_bytes)
    decoder.slim = decoder.lazy_dims = True  # as run.drive reads
    if place in (_MIDDLE, _LAST):  # its head is the opener ``range_document`` gave it
        decoder.events_open_after(form, _OPENERS[form])
    batch = Events()
    try:
        batch.extend(decoder.receive_data(document))
        while decoder.backlog:
            batch.extend(decoder.receive_more())
        batch.extend(decoder.receive_data(b""))
    except TraceInputError as e:
        raise NotParallel(str(e)) from None
    if not decoder.complete or decoder.form != form or None in batch.raws:
        raise NotParallel("a range is not a run of whole events")
    ending = (decoder.header_after, decoder.stop_reason) if place in (_LAST, _ONLY) else None
    return batch, ending


def decode_for_engine(document: bytes, place: str, form: str, max_event_bytes: int) -> tuple:
    """``(decoded, raws)`` of one range (``decode_range``): ``decoded`` is what the engine
    reads of it (``DecodedRanges.batch_of``): its events without their bytes, as compact JSON
    of the slim events as ``run.drive`` reads them (``Input Dims`` left as their JSON text,
    written back as it was; what msgspec decodes from JSON it writes as JSON that decodes to
    the same values), a checked event an array of its fields (``EventRow``). On the 10x
    resnet tile this read back in 0.6-0.8x the time of the MessagePack of the events with
    their ``Input Dims`` parsed, and the worker decodes in 0.8x the time, the dims not
    parsed; as arrays rather than objects, the engine's process read them in 228 M
    instructions fewer (callgrind, ``split --workers 2``: 10,492.8 -> 10,264.5 M), the
    workers wrote them in 304 M more. Then its frame runs (pickled with their bytes, from which
    the engine decodes the frames it asks for: ``FrameRun.__reduce__``), the bytes of its
    metadata events by index (the engine hands them back themselves), the document's ending
    and whether the events are ``checked`` (``decode.Events``); ``raws``: the original bytes
    of the other events (None for metadata), which the events' pieces are written from
    (``write.segment_text``)."""
    batch, ending = decode_range(document, place, form, max_event_bytes)
    raws = batch.raws
    phases = _phases(batch)
    metadata = ({k: raws[k] for k, phase in enumerate(phases) if phase == METADATA_PHASE}
                if METADATA_PHASE in phases else {})
    for k in metadata:
        raws[k] = None
    events = batch.events
    if batch.checked:
        events = [None if event is None else astuple(event) for event in events]
    return (_ENCODER.encode(events), batch.frame_runs, metadata, ending, batch.checked), raws


def _phases(batch: Events) -> list:
    """Each event's ``ph`` (None for a frame of a run read in bulk). A checked batch's events
    are slim structs or None: read by ``getattr`` in C (``SlimEvent.get``, a Python call per
    event, was 1 % of the instructions of a worker's decoding); another's may be dicts."""
    if batch.checked:
        return list(map(getattr, batch.events, repeat("ph"), repeat(None)))
    return [None if event is None else event.get("ph") for event in batch.events]


class _Worker:
    """A worker process's state: the original bytes of its ranges' events not yet written."""

    def __init__(self, form: str, max_event_bytes: int, level: int | None):
        self.form = form
        self.max_event_bytes = max_event_bytes
        self.level = level
        self.raws: dict = {}  # range -> [bytes or None (written)], or {index: bytes} left
        self.left: dict = {}  # range -> events not yet written

    def decode(self, r: int, document: bytes, place: str) -> tuple:
        """The range's events for the engine (``decode_for_engine``); their bytes kept here."""
        decoded, raws = decode_for_engine(document, place, self.form, self.max_event_bytes)
        self._keep(r, raws, len(raws) - len(decoded[2]))
        return decoded

    def _keep(self, r: int, raws: list, left: int) -> None:
        if left:
            self.raws[r], self.left[r] = raws, left

    def write(self, segments: list, indices) -> list:
        """Each segment ``(range, separated or None, events)`` joined and encoded
        (``write.encode_segment``), or dropped (None: an iteration not written); a segment's
        events are the next ``events`` of ``indices`` (the indices in their ranges of all the
        segments' events, one after the other: an int64 array, read here as a list)."""
        out = []
        indices = indices.tolist()
        end = 0
        for r, separated, events in segments:
            start, end = end, end + events
            raws = self.raws[r]
            picked = [raws[k] for k in indices[start:end]]
            for k in indices[start:end]:
                raws[k] = None
            self.left[r] -= len(picked)
            if not self.left[r]:
                del self.raws[r], self.left[r]
            elif self.left[r] * _COMPACT_BELOW < len(raws) and raws.__class__ is list:
                # a few events of the range wait (till the end, some): keep only theirs
                self.raws[r] = {k: raw for k, raw in enumerate(raws) if raw is not None}
            if separated is not None:
                out.append(encode_segment(segment_text(picked, separated), self.level))
        return out


def cut_segments(pairs, writer) -> tuple:
    """``(metadata, segments)`` of decided ``(owner, place)`` pairs: the metadata pairs (their
    raws are the events' bytes, for ``writer.add_many``), and the others cut into segments of
    one owner and one range, in the order decided: ``(owner, range, separated, indices)``,
    ``separated`` as ``writer.separated(owner)`` says (None: the owner is not written,
    ``writer.wants``), ``indices`` the events' indices in their range (an int64 array)."""
    metadata, owners, places = _pair_columns(pairs)
    return metadata, _segments(owners, places, writer)


def _pair_columns(pairs) -> tuple:
    """``(metadata, owners, places)`` of decided ``(owner, place)`` pairs: the metadata pairs
    (in order), and the others' owners and places (int64 arrays). By ``_native.pair_columns``
    in one pass (callgrind, ``split --workers 2`` of the 10x resnet tile: the engine's
    process's ``numpy.fromiter`` 533 -> 129 M instructions, the engine's own uses left);
    else two ``fromiter`` (2.5x as fast as ``zip(*pairs)`` and ``np.array``)."""
    native = stream_split.decode._native  # (read here: the tests switch it)
    columns = None
    if native is not None and pairs.__class__ is list:
        columns = native.pair_columns(pairs, METADATA)
    if columns is not None:
        owners, places = np.frombuffer(columns, np.int64).reshape(2, len(pairs))
    else:
        owners = np.fromiter(map(_OWNER, pairs), np.int64, len(pairs))
        places = None
    metadata = []
    if len(owners) and (owners == METADATA).any():
        metadata = [pairs[k] for k in np.flatnonzero(owners == METADATA).tolist()]
        keep = np.flatnonzero(owners != METADATA)
        owners = owners[keep]
        if places is not None:
            places = places[keep]
        else:
            pairs = [pairs[k] for k in keep.tolist()]
    if places is None:
        places = np.fromiter(map(_PLACE, pairs), np.int64, len(pairs))
    return metadata, owners, places


def _segments(owners, places, writer) -> list:
    """``cut_segments``' segments of the events of ``owners`` and ``places`` (int64 arrays,
    no metadata among them)."""
    if not len(owners):
        return []
    ranges, indices = places >> RANGE_SHIFT, places & _INDEX_MASK
    cuts = np.flatnonzero((owners[1:] != owners[:-1]) | (ranges[1:] != ranges[:-1])) + 1
    bounds = [0, *cuts.tolist(), len(owners)]
    segments = []
    for a, b in zip(bounds, bounds[1:]):
        owner = int(owners[a])
        separated = writer.separated(owner) if writer.wants(owner) else None
        segments.append((owner, int(ranges[a]), separated, indices[a:b]))
    return segments


def _ignore_stop_signals() -> None:
    """In a process of the split's (a worker, the reader): the split's process decides when
    to stop (a forked child has its handlers), so the signals it honours are ignored here,
    but SIGTERM sent to this process alone ends it."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL if signum == signal.SIGTERM else signal.SIG_IGN)


def _parent_is(parent: int) -> bool:
    """Whether this process's parent is still ``parent``: else the split was killed, or its
    fork server ended with it, and this process must not wait for ever."""
    return os.getppid() == parent


def _tasks_of(tasks, parent: int):
    """The tasks sent, until None, or until this process's parent is gone (``_parent_is``)."""
    while _parent_is(parent):
        try:
            task = tasks.get(timeout=_POLL_S)
        except queue.Empty:
            continue
        if task is None:
            return
        yield task


class _Slots:
    """Where the ranges' text and what the workers make of it cross processes, instead of
    through pipes: ``ahead`` slots of ``size`` bytes for each of ``workers`` workers, in one
    anonymous shared file (``os.memfd_create``: it has no name in /dev/shm, and the system
    frees it with the last process that maps it, however the processes end). A worker's
    ``j``-th range (range ``r``: ``j = r // workers``) has its slot ``j % ahead``: the reader
    writes the range's text there, the worker reads it and writes what it made of it in its
    place, which the engine's process reads back; the reader deals a worker's next range only
    once the engine took one (``ParallelSplit.rooms``), so the slot is free again. Anything
    larger than a slot goes in the message itself (``put``)."""

    def __init__(self, workers: int, ahead: int, size: int, fd: int | None = None):
        self.workers, self.ahead, self.size = workers, ahead, size
        if fd is None:
            fd = os.memfd_create("stream-split-ranges")
            os.ftruncate(fd, workers * ahead * size)
        self._fd = fd
        self._map = mmap.mmap(fd, workers * ahead * size)

    def __reduce__(self):
        """Sent to a process started by a fork server: the file itself goes with it (a forked
        process has the mapping already)."""
        return _attached_slots, (self.workers, self.ahead, self.size, DupFd(self._fd))

    def _offset(self, r: int) -> int:
        w, j = r % self.workers, r // self.workers
        return (w * self.ahead + j % self.ahead) * self.size

    def put(self, r: int, parts: list) -> Union[int, bytes]:
        """``parts`` (bytes-like) written one after the other in range ``r``'s slot: what to
        send instead of them (their length), or them joined when they do not fit."""
        size = sum(map(len, parts))
        if size > self.size:
            return b"".join(parts)
        at = self._offset(r)
        for part in parts:
            self._map[at:at + len(part)] = part
            at += len(part)
        return size

    def get(self, r: int, held: Union[int, bytes]) -> bytes:
        """What ``put`` wrote for range ``r`` (a copy), from what it returned."""
        if isinstance(held, bytes):
            return held
        at = self._offset(r)
        return self._map[at:at + held]

    def unpickle(self, r: int, held: Union[int, bytes]):
        """What ``put`` wrote for range ``r``, a pickle, unpickled where it lies."""
        if isinstance(held, bytes):
            return pickle.loads(held)
        at = self._offset(r)
        with memoryview(self._map) as view:
            return pickle.loads(view[at:at + held])

    def close(self) -> None:
        self._map.close()
        os.close(self._fd)


def _attached_slots(workers: int, ahead: int, size: int, fd) -> _Slots:
    """``_Slots`` in a process started by a fork server (``_Slots.__reduce__``)."""
    return _Slots(workers, ahead, size, fd.detach())


def _deal(path, form: str, range_bytes: int, head_bytes: int, slots: _Slots, rooms: list,
          tasks: list, results, stop) -> None:
    """The reader process: the file's ranges (``cut_ranges``: inflating and cutting), each
    made a document (``range_document``) in its worker's next slot once the engine's process
    made room (``rooms``), and sent to the worker to decode (``("decode", range, held, place,
    text bytes, input bytes so far)``, ``held`` as ``_Slots.put`` returns it); until ``stop``
    is set or the parent is gone. Whatever stops the reading (``NotParallel``) goes to
    ``results`` as a failure."""
    _ignore_stop_signals()
    parent = os.getppid()
    read = 0

    def on_read(n: int) -> None:
        nonlocal read
        read += n
    try:
        for r, (text, place) in enumerate(placed(_file_ranges(path, range_bytes, on_read,
                                                              head_bytes))):
            w = r % len(tasks)
            while not rooms[w].acquire(timeout=_POLL_S):
                if stop.is_set() or not _parent_is(parent):
                    break
            if stop.is_set() or not _parent_is(parent):
                break
            held = slots.put(r, range_document(text, place, form))
            tasks[w].put(("decode", r, held, place, len(text), read))
    except Exception as e:  # any failure: the trace is split as one stream
        results.put(("failed", "reader", f"{type(e).__name__}: {e}"))
    if not _parent_is(parent):  # nobody reads the tasks: do not wait to send them at exit
        for q in (*tasks, results):
            q.cancel_join_thread()


def _work(tasks, results, slots: _Slots, form: str, max_event_bytes: int,
          level: int | None) -> None:
    """A worker process: decode and write tasks, in the order sent; a range's text is read
    from its slot, and what the engine reads of it (pickled) written there in its place."""
    _ignore_stop_signals()
    worker = _Worker(form, max_event_bytes, level)
    parent = os.getppid()
    for task in _tasks_of(tasks, parent):
        kind, key, *args = task
        try:
            if kind == "decode":
                held, place, text_bytes, read = args
                decoded = worker.decode(key, slots.get(key, held), place)
                made = pickle.dumps(decoded, pickle.HIGHEST_PROTOCOL)
                results.put(("decoded", key, (slots.put(key, [made]), text_bytes, read)))
            else:
                results.put(("written", key, worker.write(*args)))
        except Exception as e:  # any failure: the trace is split as one stream
            results.put(("failed", key, f"{type(e).__name__}: {e}"))
    if not _parent_is(parent):  # nobody reads the results: do not wait to send them at exit
        results.cancel_join_thread()


def _context():
    """Fork while this process has one thread (fast, and safe); else a fork server."""
    return multiprocessing.get_context("fork" if threading.active_count() == 1
                                       else "forkserver")


class ParallelSplit:
    """The processes of one split: ``reader`` is what ``run.drive`` reads (``TraceReader``'s
    face), ``add_many`` what it hands the decided pairs to, ``finish`` spools what is left
    (before ``write.finish_split``); ``close`` stops the processes and frees the slots (a
    context manager)."""

    def __init__(self, source, opened, writer, workers: int, *, max_event_bytes: int):
        self.reader = _RangeReader(self, opened, os.path.getsize(source))
        self.writer = writer
        self.count = workers
        context = _context()
        try:
            self.slots = _Slots(workers, AHEAD_PER_WORKER, RANGE_BYTES * _SLOT_RANGES)
        except OSError as e:  # no memory to share: one stream
            raise NotParallel(f"no shared memory: {e}") from None
        #: Per worker: ranges the reader may deal it before the engine takes one.
        self.rooms = [context.Semaphore(AHEAD_PER_WORKER) for _ in range(workers)]
        self._stop = context.Event()
        self._results = context.Queue()
        self._tasks = [context.Queue() for _ in range(workers)]
        self._procs = [context.Process(target=_work, daemon=True, name=f"stream-split {k}",
                                       args=(tasks, self._results, self.slots, opened.form,
                                             max_event_bytes, writer.level))
                       for k, tasks in enumerate(self._tasks)]
        self._dealer = context.Process(
            target=_deal, daemon=True, name="stream-split reader",
            args=(source, opened.form, RANGE_BYTES, opened.bytes_read, self.slots, self.rooms,
                  self._tasks, self._results, self._stop))
        self._start()
        self._inbox: dict = {}
        # the round's decided pairs: metadata pairs, and the others' columns (``add_many``)
        self._metadata: list = []
        self._owners: list = []
        self._places: list = []
        self._gathered = 0
        self._rounds: list = []  # (round, [(owner, worker)], workers) sent, in order
        self._sent_rounds = 0

    def _start(self) -> None:
        """Start the workers and the reader; when one cannot be (no memory to fork), stop
        those started and free the slots (the split is then one stream)."""
        started = []
        try:
            for proc in (*self._procs, self._dealer):
                proc.start()
                started.append(proc)
        except OSError as e:
            for proc in started:
                proc.kill()
                proc.join()
            self.slots.close()
            raise NotParallel(f"a process of the split could not start: {e}") from None

    def send(self, worker: int, task: tuple) -> None:
        self._tasks[worker].put(task)

    def take(self, kind: str, key):
        """The result of the task ``key`` of ``kind`` (waiting for it)."""
        while (kind, key) not in self._inbox:
            self._pump(block=True)
        return self._inbox.pop((kind, key))

    def _pump(self, block: bool) -> bool:
        try:
            kind, key, value = self._results.get(block, _POLL_S)
        except queue.Empty:
            if block and not self._alive():
                raise NotParallel("a process of the split ended") from None
            return False
        if kind == "failed":
            raise NotParallel(value)
        self._inbox[kind, key] = value
        return True

    def _alive(self) -> bool:
        """Whether every worker runs, and the reader runs or ended after its last range."""
        return (all(proc.is_alive() for proc in self._procs)
                and (self._dealer.is_alive() or self._dealer.exitcode == 0))

    # -- writing --------------------------------------------------------------------------

    def add_many(self, pairs) -> None:
        """Decided ``(owner, place)`` pairs (``run.drive``'s ``on_pairs``), read as columns at
        once (``_pair_columns``): their tuples die here, not after a round, so the young
        collections do not walk them (``run.collect_young``)."""
        metadata, owners, places = _pair_columns(pairs)
        self._metadata += metadata
        self._owners.append(owners)
        self._places.append(places)
        self._gathered += len(pairs)  # (metadata too: the rounds end where they did)
        if self._gathered >= ROUND_PAIRS:
            self._send_round()
            while self._pump(block=False):
                pass
            self._spool_rounds(len(self._rounds) > ROUNDS_AHEAD)

    def finish(self) -> None:
        """Every decided event spooled (the run is over)."""
        self._send_round()
        self._spool_rounds(block=True)

    def _send_round(self) -> None:
        """The pairs gathered as segments to the workers that hold their bytes: metadata to
        the writer (its bytes came back from the worker)."""
        metadata, self._metadata = self._metadata, []
        if metadata:
            self.writer.add_many(metadata)
        if not self._gathered:
            return
        segments = _segments(np.concatenate(self._owners), np.concatenate(self._places),
                             self.writer)
        self._owners, self._places, self._gathered = [], [], 0
        if not segments:
            return
        jobs: dict = {}  # worker -> ([(range, separated, events)], [indices])
        order = []
        for owner, r, separated, indices in segments:
            job = jobs.setdefault(r % self.count, ([], []))
            job[0].append((r, separated, len(indices)))
            job[1].append(indices)
            if separated is not None:
                order.append((owner, r % self.count))
        key = self._sent_rounds
        self._sent_rounds += 1
        for worker, (segments, indices) in jobs.items():
            # the indices as one array, its bytes pickled as they lie: 0.3 ms of this
            # process's CPU a round on the 10x resnet tile (a list per segment, made here
            # and pickled an int at a time: 1.2 ms)
            self.send(worker, ("write", (key, worker), segments, np.concatenate(indices)))
        self._rounds.append((key, order, list(jobs)))

    def _spool_rounds(self, block: bool) -> None:
        """Hand the written segments to the writer, round by round in order; ``block``: every
        round sent (else those done)."""
        while self._rounds:
            key, order, workers = self._rounds[0]
            if not block and any(("written", (key, w)) not in self._inbox for w in workers):
                return
            # each worker's segments come in the order they were sent to it
            written = {w: iter(self.take("written", (key, w))) for w in workers}
            self.writer.add_encoded([(owner, *next(written[w])) for owner, w in order])
            self._rounds.pop(0)

    def close(self) -> None:
        """Stop the reader and the workers (at once when the run failed), and free the
        slots."""
        self._stop.set()
        for room in self.rooms:  # a reader waiting for room sees the stop
            room.release()
        for tasks in self._tasks:
            tasks.put(None)
        for proc in (self._dealer, *self._procs):
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for q in (*self._tasks, self._results):
            q.close()
            q.cancel_join_thread()
        self.slots.close()

    def __enter__(self) -> "ParallelSplit":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _events_read(encoded: bytes, checked: bool) -> list:
    """The events of a range as ``decode_for_engine`` wrote them: a checked range's by
    ``_native.event_rows`` where built, as ``validate.SlimEvent`` (the one-stream decoder's
    structs; its strings from the native reader's cache, so the engine's process hashes a
    name once, not once an event; callgrind of ``split --workers 2`` on the 10x stripped
    resnet tile: the engine's process 8,664.8 -> 8,287.0 M instructions), else by msgspec
    (``EventRow`` or dicts: the same values)."""
    native = stream_split.decode._native  # (read here: the tests switch it)
    if checked and native is not None:
        events = native.event_rows(encoded, SlimEvent, msgspec.Raw)
        if events is not None:
            return events
    return _EVENTS[checked].decode(encoded)


class DecodedRanges:
    """What ``run.drive`` reads of a trace whose ranges are decoded elsewhere
    (``decode_for_engine``): its batches in file order and the reader's account (``form``,
    ``header_before`` and ``header_after``, ``complete``, ``stop_reason``, ``bytes_read``), as
    a ``read.TraceReader`` gives them, from ``opened`` (the trace opened up to its first
    event, or anything with its ``form``, ``compression`` and ``header_before``). A subclass
    gives ``batches``, each range's ``batch_of`` in order."""

    def __init__(self, opened, input_size: int | None = None):
        self.form = opened.form
        self.compression = opened.compression
        self.header_before = opened.header_before
        self.header_after: dict = {}
        self.complete = False
        self.stop_reason = None
        self.bytes_read = 0
        self.input_bytes = 0
        self.input_size = input_size

    def batch_of(self, r: int, decoded: tuple) -> Events:
        """Range ``r``'s events from what ``decode_for_engine`` made of it; an event's raw
        is its place (``r << RANGE_SHIFT | index``), a metadata event's its bytes; the
        last range's ending completes the account."""
        encoded, frame_runs, metadata, ending, checked = decoded
        batch = Events(_events_read(encoded, checked), None, frame_runs, checked)
        places = list(range(r << RANGE_SHIFT, (r << RANGE_SHIFT) + len(batch.events)))
        for k, raw in metadata.items():
            places[k] = raw
        batch.raws = places
        if ending is not None:  # every range was a run of whole events: the document is
            self.header_after, self.stop_reason = ending
            self.complete = True
        return batch

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


class _RangeReader(DecodedRanges):
    """The ranges of a trace dealt to the workers of a ``ParallelSplit`` by its reader
    process (``_deal``)."""

    def __init__(self, split: ParallelSplit, opened, input_size: int):
        super().__init__(opened, input_size)
        self._split = split

    def batches(self, raws: bool = True, slim: bool = True):
        """Each range's events, in file order, until the last; an event's raw is its place, a
        metadata event's its bytes. Taking a range from its slot makes room for the reader to
        deal its worker another (``AHEAD_PER_WORKER`` ahead of the engine)."""
        split = self._split
        r = 0
        while not self.complete:
            held, text_bytes, self.input_bytes = split.take("decoded", r)
            decoded = split.slots.unpickle(r, held)
            split.rooms[r % split.count].release()
            self.bytes_read += text_bytes
            yield self.batch_of(r, decoded)
            r += 1
