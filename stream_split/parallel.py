"""``split --workers N``: one trace split across N processes, with the output of one stream.

An adapter of ``folder.split_to_folder``, beside the one-stream path; it decides nothing. This
process reads: it inflates the file (``decode.Decompressor``: ISA-L) and deals its JSON text
in ranges of about ``RANGE_BYTES``, each cut just after a ``}`` that ``,`` and a line break
follow (as Kineto writes events; a trace with no line breaks is one range). A worker
decodes its range with the project's decoder (``decode.TraceDecoder``, slim, as ``run.drive``
reads), the range made a document of its own (``[`` ... ``]``, or the trace's own head and
tail for the first and last), keeps the events' original bytes and sends back the compact
events the engine reads. This process feeds them to the one engine (``run.drive``, in file
order) with each event's place (``range << RANGE_SHIFT | index``) instead of its bytes; the
decided ``(owner, place)`` pairs are cut into segments (one owner, one range, in the order
decided), which the range's worker joins (``write.segment_text``) and deflates
(``write.encode_segment``); the segments go to each piece's spool in the order decided
(``write.PieceWriter.add_encoded``), and the pieces and the manifest are assembled as for one
stream (``write.finish_split``). So every piece holds the same events in the same order as with
``--workers 1``, and the manifest is the same.

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
(freed as they are written) and one range in decoding: its memory does not grow with the trace.
"""
from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import threading
from typing import Union

import msgspec
import numpy as np

from stream_split.core.records import METADATA
from stream_split.core.serving import DIFFUSION_CODE
from stream_split.core.validate import SlimEventWithDims
from stream_split.decode import Decompressor, Events, TraceDecoder
from stream_split.errors import TraceInputError
from stream_split.run import STOP_SIGNALS
from stream_split.trace_format import METADATA_PHASE
from stream_split.write import encode_segment, segment_text

__all__ = ["NotParallel", "ParallelSplit", "takes_parallel_path", "takes_ranges", "placed",
           "cut_ranges", "decode_range", "decode_for_engine", "DecodedRanges", "cut_segments",
           "RANGE_BYTES", "RANGE_SHIFT"]

#: Bytes of JSON text per range dealt (the first cut after this many).
RANGE_BYTES = 4 << 20
#: Files smaller than this on disk are split as one stream (starting workers costs more).
PARALLEL_MIN_BYTES = 8 << 20
#: Bytes read from the file at a time.
READ_CHUNK = 1 << 20
#: Ranges dealt to each worker ahead of the engine.
AHEAD_PER_WORKER = 2
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
#: Seconds between two looks at whether the workers are alive while waiting for them.
_POLL_S = 1.0
_FORMS = ("object", "array")
_OPENERS = {"object": b'{"traceEvents": [', "array": b"["}
_CLOSERS = {"object": b"]}", "array": b"]"}
_FIRST, _MIDDLE, _LAST, _ONLY = "first", "middle", "last", "only"
#: Where a range is cut (after its ``}``): a line break is never inside a JSON string, so
#: neither is the ``},`` before it (an event's ``args`` may still hold one: see above).
_CUT = b"},\n"
_ENCODER = msgspec.msgpack.Encoder()
#: The prefixes of frame names that the engine looks for in a run (``names_begin_with``).
_FRAME_NAME_PREFIXES = (DIFFUSION_CODE,)
#: A range's events read back, by whether they are ``checked``: slim structs (a frame run
#: read in bulk holds None), or dicts.
_EVENTS = {True: msgspec.msgpack.Decoder(list[Union[SlimEventWithDims, None]]),
           False: msgspec.msgpack.Decoder()}


class NotParallel(Exception):
    """This trace cannot be split in ranges after all: split it as one stream."""


def takes_parallel_path(source, reader, workers: int, follow) -> bool:
    """Whether ``source`` (opened as ``reader``, up to its first event) is split by
    ``workers`` processes (see the module docstring)."""
    return (workers > 1 and follow is None and isinstance(source, (str, os.PathLike))
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


def decode_range(text: bytes, place: str, form: str, max_event_bytes: int) -> tuple:
    """``(events, ending)`` of one range, made a document of its own: the events with their
    original bytes, as a slim ``Events`` batch, and for the last range the document's
    ``(header_after, stop_reason)`` (else None); ``NotParallel`` when the range is not a run
    of whole events (see the module docstring)."""
    if place in (_MIDDLE, _LAST):
        if text[:1] != b",":
            raise NotParallel("a range does not begin after an event")
        text = _OPENERS[form] + text[1:]
    if place in (_FIRST, _MIDDLE):
        text += _CLOSERS[form]
    decoder = TraceDecoder(max_event_bytes=max_event_bytes)
    decoder.slim = True
    batch = Events()
    try:
        batch.extend(decoder.receive_data(text))
        while decoder.backlog:
            batch.extend(decoder.receive_more())
        batch.extend(decoder.receive_data(b""))
    except TraceInputError as e:
        raise NotParallel(str(e)) from None
    if not decoder.complete or decoder.form != form or None in batch.raws:
        raise NotParallel("a range is not a run of whole events")
    ending = (decoder.header_after, decoder.stop_reason) if place in (_LAST, _ONLY) else None
    return batch, ending


def decode_for_engine(text: bytes, place: str, form: str, max_event_bytes: int) -> tuple:
    """``(decoded, raws)`` of one range (``decode_range``): ``decoded`` is what the engine
    reads of it (``DecodedRanges.batch_of``): its events without their bytes, as MessagePack
    (about 3x as fast to read back as a pickle, and 40x to write), its frame runs (without
    their bytes: ``FrameRun.without_bytes``, which keeps what the engine asks of them), the bytes
    of its metadata events by index (the engine hands them back themselves), the
    document's ending and whether the events are ``checked`` (``decode.Events``); ``raws``:
    the original bytes of the other events (None for metadata), which the events' pieces are
    written from (``write.segment_text``)."""
    batch, ending = decode_range(text, place, form, max_event_bytes)
    raws = batch.raws
    metadata = {k: raws[k] for k, event in enumerate(batch.events)
                if event is not None and event.get("ph") == METADATA_PHASE}
    for k in metadata:
        raws[k] = None
    runs = [run.without_bytes(_FRAME_NAME_PREFIXES) for run in batch.frame_runs]
    return (_ENCODER.encode(batch.events), runs, metadata, ending, batch.checked), raws


class _Worker:
    """A worker process's state: the original bytes of its ranges' events not yet written."""

    def __init__(self, form: str, max_event_bytes: int, level: int | None):
        self.form = form
        self.max_event_bytes = max_event_bytes
        self.level = level
        self.raws: dict = {}  # range -> [bytes or None (written)], or {index: bytes} left
        self.left: dict = {}  # range -> events not yet written

    def decode(self, r: int, text: bytes, place: str) -> tuple:
        """The range's events for the engine (``decode_for_engine``); their bytes kept here."""
        decoded, raws = decode_for_engine(text, place, self.form, self.max_event_bytes)
        self._keep(r, raws, len(raws) - len(decoded[2]))
        return decoded

    def _keep(self, r: int, raws: list, left: int) -> None:
        if left:
            self.raws[r], self.left[r] = raws, left

    def write(self, segments: list) -> list:
        """Each segment ``(range, separated or None, indices)`` joined and encoded
        (``write.encode_segment``), or dropped (None: an iteration not written)."""
        out = []
        for r, separated, indices in segments:
            raws = self.raws[r]
            picked = [raws[k] for k in indices]
            for k in indices:
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
    if not pairs:
        return [], []
    owners, places = zip(*pairs)
    owners = np.array(owners, np.int64)
    metadata = np.flatnonzero(owners == METADATA).tolist()
    metadata_pairs = [pairs[k] for k in metadata]
    if metadata:
        keep = np.flatnonzero(owners != METADATA)
        places = [places[k] for k in keep.tolist()]
        owners = owners[keep]
    if not len(owners):
        return metadata_pairs, []
    places = np.array(places, np.int64)
    ranges, indices = places >> RANGE_SHIFT, places & _INDEX_MASK
    cuts = np.flatnonzero((owners[1:] != owners[:-1]) | (ranges[1:] != ranges[:-1])) + 1
    bounds = [0, *cuts.tolist(), len(owners)]
    segments = []
    for a, b in zip(bounds, bounds[1:]):
        owner = int(owners[a])
        separated = writer.separated(owner) if writer.wants(owner) else None
        segments.append((owner, int(ranges[a]), separated, indices[a:b]))
    return metadata_pairs, segments


def _tasks_of(tasks, parent: int):
    """The tasks sent, until None, or until this process's parent is gone (the split was
    killed, or its fork server ended with it: its workers must not wait for ever)."""
    while os.getppid() == parent:
        try:
            task = tasks.get(timeout=_POLL_S)
        except queue.Empty:
            continue
        if task is None:
            return
        yield task


def _work(tasks, results, form: str, max_event_bytes: int, level: int | None) -> None:
    """A worker process: decode and write tasks, in the order sent."""
    # The split's process decides when to stop (a forked worker has its handlers): a worker
    # ignores the signals it honours, but ends on SIGTERM sent to it alone.
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL if signum == signal.SIGTERM else signal.SIG_IGN)
    worker = _Worker(form, max_event_bytes, level)
    parent = os.getppid()
    for task in _tasks_of(tasks, parent):
        kind, key, *args = task
        try:
            if kind == "decode":
                results.put(("decoded", key, worker.decode(key, *args)))
            else:
                results.put(("written", key, worker.write(args[0])))
        except Exception as e:  # any failure: the trace is split as one stream
            results.put(("failed", key, f"{type(e).__name__}: {e}"))
    if os.getppid() != parent:  # nobody reads the results: do not wait to send them at exit
        results.cancel_join_thread()


def _context():
    """Fork while this process has one thread (fast, and safe); else a fork server."""
    return multiprocessing.get_context("fork" if threading.active_count() == 1
                                       else "forkserver")


class ParallelSplit:
    """The workers of one split: ``reader`` is what ``run.drive`` reads (``TraceReader``'s
    face), ``add_many`` what it hands the decided pairs to, ``finish`` spools what is left
    (before ``write.finish_split``); ``close`` stops the workers (a context manager)."""

    def __init__(self, source, opened, writer, workers: int, *, max_event_bytes: int):
        self.reader = _RangeReader(self, source, opened, RANGE_BYTES)
        self.writer = writer
        self.count = workers
        context = _context()
        self._results = context.Queue()
        self._tasks = [context.Queue() for _ in range(workers)]
        self._procs = [context.Process(target=_work, daemon=True, name=f"stream-split {k}",
                                       args=(tasks, self._results, opened.form,
                                             max_event_bytes, writer.level))
                       for k, tasks in enumerate(self._tasks)]
        for proc in self._procs:
            proc.start()
        self._inbox: dict = {}
        self._pairs: list = []
        self._rounds: list = []  # (round, [(owner, worker)], workers) sent, in order
        self._sent_rounds = 0

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
            if block and not all(proc.is_alive() for proc in self._procs):
                raise NotParallel("a worker process ended") from None
            return False
        if kind == "failed":
            raise NotParallel(value)
        self._inbox[kind, key] = value
        return True

    # -- writing --------------------------------------------------------------------------

    def add_many(self, pairs) -> None:
        """Decided ``(owner, place)`` pairs (``run.drive``'s ``on_pairs``)."""
        self._pairs.extend(pairs)
        if len(self._pairs) >= ROUND_PAIRS:
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
        pairs, self._pairs = self._pairs, []
        metadata, segments = cut_segments(pairs, self.writer)
        if metadata:
            self.writer.add_many(metadata)
        if not segments:
            return
        jobs: dict = {}
        order = []
        for owner, r, separated, indices in segments:
            jobs.setdefault(r % self.count, []).append((r, separated, indices.tolist()))
            if separated is not None:
                order.append((owner, r % self.count))
        key = self._sent_rounds
        self._sent_rounds += 1
        for worker, segments in jobs.items():
            self.send(worker, ("write", (key, worker), segments))
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
        """Stop the workers (at once when the run failed)."""
        for tasks in self._tasks:
            tasks.put(None)
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for q in (*self._tasks, self._results):
            q.close()
            q.cancel_join_thread()

    def __enter__(self) -> "ParallelSplit":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
        batch = Events(_EVENTS[checked].decode(encoded), None, frame_runs, checked)
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
    """The ranges of a trace dealt to the workers of a ``ParallelSplit``."""

    def __init__(self, split: ParallelSplit, source, opened, range_bytes: int):
        super().__init__(opened, os.path.getsize(source))
        self._split = split
        self._source = source
        self._range_bytes = range_bytes
        self._head_bytes = opened.bytes_read

    def batches(self, raws: bool = True, slim: bool = True):
        """Each range's events, in file order; an event's raw is its place, a metadata
        event's its bytes. The ranges are dealt by a thread of this process (inflating
        and reading release the GIL), ``AHEAD_PER_WORKER`` per worker ahead of the engine."""
        dealer = _Dealer(self, self._split.count * AHEAD_PER_WORKER)
        try:
            while (r := dealer.next_range()) is not None:
                yield self.batch_of(r, self._split.take("decoded", r))
                dealer.taken()
        finally:
            dealer.stop()

    def deal(self, dealer: "_Dealer") -> None:
        """Deal every range to the workers in turn (the dealer's thread)."""
        for r, (text, place) in enumerate(placed(_file_ranges(
                self._source, self._range_bytes, self._read, self._head_bytes))):
            if not dealer.wait_for_room():
                return
            self.bytes_read += len(text)
            self._split.send(r % self._split.count, ("decode", r, text, place))
            dealer.dealt(r)

    def _read(self, n: int) -> None:
        self.input_bytes += n


class _Dealer:
    """The thread that deals the ranges (``_RangeReader.deal``), at most ``ahead`` of the
    engine; ``next_range`` hands the engine the next range dealt, None after the last, and
    raises what stopped the dealing (``NotParallel``)."""

    def __init__(self, reader: _RangeReader, ahead: int):
        self._room = threading.Semaphore(ahead)
        self._dealt: queue.Queue = queue.Queue()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, args=(reader,), daemon=True,
                                         name="stream-split dealer")
        self._thread.start()

    def _run(self, reader: _RangeReader) -> None:
        try:
            reader.deal(self)
        except BaseException as e:  # handed to the engine's thread
            self._dealt.put(e)
        self._dealt.put(None)

    def wait_for_room(self) -> bool:
        self._room.acquire()
        return not self._stopped

    def dealt(self, r: int) -> None:
        self._dealt.put(r)

    def taken(self) -> None:
        self._room.release()

    def next_range(self) -> int | None:
        r = self._dealt.get()
        if isinstance(r, BaseException):
            raise r
        return r

    def stop(self) -> None:
        self._stopped = True
        self._room.release()
        self._thread.join()
