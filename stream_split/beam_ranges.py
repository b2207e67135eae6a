"""One huge trace split across Beam workers: the archive's path for traces over a size.

``SplitTraces(split_large_over=BYTES)`` (``stream_split.beam``) sends each trace larger than
``BYTES`` through ``SplitInRanges`` instead of splitting it on one worker. Its steps are those
of ``split --workers N`` (``parallel.py``) made Beam steps, with the same parts:

1. ``Cut`` (one worker per trace): the trace opened up to its first event, inflated and cut
   in ranges of about ``RANGE_BYTES`` of JSON text (``parallel.cut_ranges``), each written to
   the trace's scratch folder; out comes one element per range, and the trace's head (its
   form and header keys, the number of ranges).
2. ``Decode`` (a map over the ranges, spread over the workers): each range decoded into what
   the engine reads of it (``parallel.decode_for_engine``, written beside the range), and
   where each event's bytes lie in the range.
3. ``Decide`` (a reduce, one key per trace): the one engine runs over the ranges' events in
   file order (``run.read_through`` over ``_ScratchRanges``, a ``parallel.DecodedRanges``),
   and the decided ``(owner, place)`` pairs are cut into segments of one owner and one range
   (``parallel.cut_segments``, with ``write.PieceWriter`` saying which owners are written and
   where a separator goes). Out come, per range, its segments to write, and the trace's plan:
   its records and counts (``SplitterAccount``), its metadata events, the owner of each
   segment in the order decided.
4. ``Write`` (a map over the ranges): each segment's events' original bytes joined and
   deflated (``write.segment_text``, ``write.encode_segment``) into the range's segment file.
5. ``Assemble`` (one key per trace): the segments appended to their pieces in the order
   decided (``PieceWriter.add_encoded``), the pieces and the manifest written as ``stream-split
   split`` writes them (``folder.finish_folder``), and copied out (``copy_out``).

Without pieces (records only) steps 4 and 5 are left out. The pieces hold the same events
in the same order as ``stream-split split`` writes (their gzip members are cut elsewhere:
compare them gunzipped), and the manifest and the records are the same.

What must never travel as Beam elements: the text, the events, or their bytes (a shuffle moves
some 47 k elements a second; the runner may hold a whole PCollection in memory). They go
through files under ``scratch_prefix`` (which every worker must reach, like the outputs: the
pipeline puts it beside them), one folder per trace, removed at the end; Beam moves paths,
counts and segment lists. Each step holds one range, except ``Decide``, which holds the
segment lists (an index per event written) until its end.

A trace that cannot be cut (JSON Lines, zstd; a cut inside an event; a truncated gzip; any
failure before the engine's end) comes out on ``WHOLE``, to be split as one stream by the
usual step, as ``split --workers`` falls back to one stream: the output is that path's.
"""
from __future__ import annotations

try:
    import apache_beam as beam
    from apache_beam.io.filesystem import CompressionTypes, FileMetadata
    from apache_beam.io.filesystems import FileSystems
except ImportError as _error:  # pragma: no cover - depends on the installation
    raise ImportError(
        "stream_split.beam_ranges needs Apache Beam: pip install 'stream-split[beam]'"
    ) from _error

import hashlib
import io
import os
import pickle
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from stream_split.config import SplitConfig
from stream_split.folder import finish_folder
from stream_split.parallel import (
    RANGE_BYTES, DecodedRanges, NotParallel, cut_ranges, cut_segments, decode_for_engine,
    placed, range_document, takes_ranges)
from stream_split.run import StopRequest, new_splitter, open_reader, read_through
from stream_split.stats import IterationStats
from stream_split.write import PieceWriter, encode_segment, segment_text

__all__ = ["SplitInRanges", "RangedOutputs", "RangedSplit", "SplitterAccount", "WHOLE",
           "RANGE_BYTES", "time_budget_stop", "pieces_dir_name", "copy_out"]

#: The output of ``SplitInRanges`` of the traces to split as one stream after all.
WHOLE = "whole"
_RANGES, _HEADS, _WRITES, _DONE = "ranges", "heads", "writes", "done"
#: Encoded bytes of segments handed to the piece writer at a time.
_ENCODED_BATCH = 1 << 20
#: Segment files kept open at once while assembling.
_OPEN_SEGMENT_FILES = 32
_TRACE_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json.zst", ".json",
                   ".jsonl.gz", ".jsonl", ".gz", ".zst")


def _trace_stem(path: str) -> str:
    name = FileSystems.split(path)[1]
    for suffix in _TRACE_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def pieces_dir_name(path: str) -> str:
    """``<stem>-<hash>``: the stem alone collides across an archive (rank0 of every job)."""
    return f"{_trace_stem(path)}-{hashlib.sha1(path.encode('utf-8')).hexdigest()[:8]}"


def copy_out(local_dir: str, dest_dir: str) -> None:
    """Copy every file of ``local_dir`` to ``dest_dir`` on any Beam file system.

    Why not write the pieces there directly: ``PieceWriter`` appends each event to a per-piece
    spool file as it is decided, reopening them in turn (events arrive in file order, not
    piece order), and assembles the pieces at the end. That needs local, appendable, seekable
    files; object stores (gs://, s3://) offer only whole-object writes. So the pieces are
    built in the worker's scratch directory and copied once, each in one sequential write.
    """
    for name in sorted(os.listdir(local_dir)):
        source = os.path.join(local_dir, name)
        if not os.path.isfile(source):
            continue
        mime = "application/json" if name.endswith(".json") else "application/gzip"
        with open(source, "rb") as src, FileSystems.create(
                FileSystems.join(dest_dir, name), mime_type=mime,
                compression_type=CompressionTypes.UNCOMPRESSED) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)


@contextmanager
def time_budget_stop(seconds: float | None):
    """A ``StopRequest`` requested after ``seconds`` (None: never) while the block runs."""
    stop = StopRequest()
    timer = None
    if seconds is not None:  # the stop is seen between two batches of events
        timer = threading.Timer(seconds, stop.request)
        timer.daemon = True
        timer.start()
    try:
        yield stop
    finally:
        if timer is not None:
            timer.cancel()


@dataclass
class SplitterAccount:
    """What a closed ``Splitter`` tells of a trace (its records, evidence and counts), as
    ``write.build_manifest`` and the Beam summaries read it: made on the worker that ran the
    engine, sent on to the one that assembles the pieces."""
    options: object
    evidence: dict
    iterations: list
    events_in: int
    events_out: int
    metadata_events: int
    outside_events: int
    outside_kernels: int
    invalid_events: int
    invalid_examples: list
    events_in_iterations: int | None = None
    #: The verdicts on the records (``run.RunOutcome.stats``), None where not known.
    stats: IterationStats | None = None
    kinds: object = None  # ``Splitter.kinds``

    @classmethod
    def of(cls, splitter, stats: IterationStats | None = None) -> "SplitterAccount":
        return cls(splitter.options, splitter.evidence, list(splitter.iterations),
                   splitter.events_in, splitter.events_out, splitter.metadata_events,
                   splitter.outside_events, splitter.outside_kernels, splitter.invalid_events,
                   list(splitter.invalid_examples), splitter.events_in_iterations, stats,
                   splitter.kinds)


@dataclass
class _Head:
    """A trace as ``Cut`` found it (``form``, ``compression``, ``header_before``: a
    ``DecodedRanges``'s ``opened``), its ranges' count, or the ``problem`` that keeps it
    whole."""
    file: FileMetadata
    scratch: str
    form: str | None = None
    compression: str | None = None
    header_before: dict = field(default_factory=dict)
    ranges: int = 0
    problem: str | None = None
    seconds: float = 0.0


class _Range(NamedTuple):
    r: int
    place: str
    form: str
    scratch: str  # the trace's scratch folder, where its text is


class _Decoded(NamedTuple):
    r: int
    size: int  # bytes of JSON text
    seconds: float
    failure: str | None


class _WriteTask(NamedTuple):
    r: int
    segments: list  # [(seq, separated, indices)]
    level: int | None


class _Written(NamedTuple):
    r: int
    entries: list  # [(seq, offset, length, crc32, size)] in the range's segment file
    seconds: float


@dataclass
class _Plan:
    """What ``Decide`` hands to ``Assemble``: the run's outcome (``reader_info``, ``error``,
    ``stopped``, the header keys: a reader's face for ``finish_split``), the records and
    counts, the metadata pairs, each segment's owner by its sequence number."""
    head: _Head
    account: SplitterAccount
    reader_info: dict
    error: str | None
    stopped: bool
    header_before: dict
    header_after: dict
    metadata: list
    owners: list
    seconds: float


@dataclass
class RangedSplit:
    """One trace split in ranges: what the Beam outputs are made of (``stream_split.beam``).
    ``pieces``: the folder its pieces were copied to, ``files``: {iteration index: piece},
    ``failure``: what went wrong after the engine's end (the trace is then a dead letter)."""
    file: FileMetadata
    account: SplitterAccount | None
    reader_info: dict
    error: str | None
    stopped: bool
    ranges: int
    pieces: str | None = None
    files: dict | None = None
    failure: str | None = None
    seconds: float = 0.0


def _scratch_file(scratch: str, r: int, kind: str) -> str:
    """Range ``r``'s file of ``kind``: ``json`` (its text), ``decoded`` and ``offsets``
    (``Decode``), ``segments`` (``Write``)."""
    return FileSystems.join(scratch, f"{r:06d}.{kind}")


def _write_file(path: str, data: bytes) -> None:
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(data)


def _read_file(path: str) -> bytes:
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        return f.read()


def _remove_scratch(scratch: str) -> None:
    """Remove a trace's scratch folder (every file in it, on an object store)."""
    if "://" not in scratch:
        shutil.rmtree(scratch, ignore_errors=True)
        return
    found = FileSystems.match([FileSystems.join(scratch, "*")])[0].metadata_list
    if found:
        FileSystems.delete([meta.path for meta in found])


def _one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}".splitlines()[0]


class _CutFn(beam.DoFn):
    """A large trace in; its ranges (main output, keyed by the trace) and its head
    (``_HEADS``) out. Its head says why when it cannot be cut."""

    def __init__(self, scratch_prefix: str, range_bytes: int, max_event_bytes: int):
        self._prefix = scratch_prefix
        self._range_bytes = range_bytes
        self._max_event_bytes = max_event_bytes

    def process(self, file: FileMetadata):
        started = time.perf_counter()
        head = _Head(file, FileSystems.join(self._prefix, pieces_dir_name(file.path)))
        try:
            yield from self._cut(head)
        except Exception as e:  # noqa: BLE001 - NotParallel or any: split whole, as ever
            head.problem = _one_line(e)
        head.seconds = time.perf_counter() - started
        yield beam.pvalue.TaggedOutput(_HEADS, (file.path, head))

    def _cut(self, head: _Head):
        path = head.file.path
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as stream:
            with open_reader(stream, name=path, max_event_bytes=self._max_event_bytes) as reader:
                head.form, head.compression = reader.form, reader.compression
                head.header_before = reader.header_before
                head_bytes = reader.bytes_read
                if not takes_ranges(reader):
                    head.problem = f"a trace of the {reader.form} form, {reader.compression}"
                    return
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as stream:
            texts = cut_ranges(stream, self._range_bytes, head_bytes=head_bytes)
            for r, (text, place) in enumerate(placed(texts)):
                _write_file(_scratch_file(head.scratch, r, "json"), text)
                head.ranges = r + 1
                yield path, _Range(r, place, head.form, head.scratch)


class _DecodeFn(beam.DoFn):
    """A range in; what the engine reads of it and where its events' bytes lie written
    beside it (``.decoded``, ``.offsets``); ``(trace, _Decoded)`` out."""

    def __init__(self, max_event_bytes: int):
        self._max_event_bytes = max_event_bytes

    def process(self, keyed):
        trace, (r, place, form, scratch) = keyed
        started = time.perf_counter()
        text = _read_file(_scratch_file(scratch, r, "json"))
        try:
            document = b"".join(range_document(text, place, form))
            decoded, raws = decode_for_engine(document, place, form, self._max_event_bytes)
            offsets = _offsets(text, raws)
        except Exception as e:  # noqa: BLE001 - NotParallel or any: split whole, as ever
            yield trace, _Decoded(r, len(text), 0.0, _one_line(e))
            return
        _write_file(_scratch_file(scratch, r, "decoded"),
                    pickle.dumps(decoded, pickle.HIGHEST_PROTOCOL))
        buffer = io.BytesIO()
        np.save(buffer, offsets)
        _write_file(_scratch_file(scratch, r, "offsets"), buffer.getvalue())
        yield trace, _Decoded(r, len(text), time.perf_counter() - started, None)


def _offsets(text: bytes, raws: list) -> np.ndarray:
    """``[[start, end]]`` of each event's bytes in the range's ``text`` (0, 0 for a metadata
    event, whose bytes the engine hands back); the raws lie in it in order, after the
    header (first range) or a separator, so each is found where the search for it starts."""
    spans = np.zeros((len(raws), 2), np.int64)
    find = text.find
    at = 0
    for k, raw in enumerate(raws):
        if raw is None:
            continue
        start = find(raw, at)
        if start < 0:
            raise NotParallel("an event's bytes are not in its range")
        at = start + len(raw)
        spans[k] = start, at
    return spans


class _ScratchRanges(DecodedRanges):
    """A trace's ranges as ``Decode`` wrote them, read in order for the engine."""

    def __init__(self, head: _Head, decoded: list):
        super().__init__(head)
        self._scratch = head.scratch
        self._sizes = [d.size for d in decoded]

    def batches(self, raws: bool = True, slim: bool = True):
        for r, size in enumerate(self._sizes):
            batch = self.batch_of(r, pickle.loads(_read_file(
                _scratch_file(self._scratch, r, "decoded"))))
            self.bytes_read += size
            yield batch


class _Segments:
    """The decided pairs cut into segments (``parallel.cut_segments``) and gathered: the
    metadata pairs, each written segment's owner by its sequence number, and per range its
    segments ``(seq, separated, indices)``. ``order``: a ``PieceWriter`` used only for what
    it decides (which owners are written, where a separator goes)."""

    def __init__(self, order: PieceWriter):
        self._order = order
        self.metadata: list = []
        self.owners: list = []
        self.by_range: dict = {}

    def add(self, pairs) -> None:
        metadata, segments = cut_segments(pairs, self._order)
        self.metadata.extend(metadata)
        for owner, r, separated, indices in segments:
            if separated is None:
                continue
            self.by_range.setdefault(r, []).append((len(self.owners), separated, indices))
            self.owners.append(owner)


class ScratchFn(beam.DoFn):
    """A DoFn with a local scratch folder per worker (spill files, spools), made at
    ``setup`` and not pickled with the DoFn; ``scratch_prefix`` names it."""
    scratch_prefix = "stream-split-ranges-"

    def __init__(self):
        self._scratch_root = None

    def setup(self):
        self._scratch_root = tempfile.mkdtemp(prefix=self.scratch_prefix)

    def teardown(self):
        if self._scratch_root:
            shutil.rmtree(self._scratch_root, ignore_errors=True)
            self._scratch_root = None


class _DecideFn(ScratchFn):
    """A trace's head and decoded ranges in (grouped by the trace); out: the trace whole
    (``WHOLE``) when it could not be cut; else its ``RangedSplit`` (``_DONE``, records only),
    or its write tasks (``_WRITES``) and its plan (main)."""

    def __init__(self, config: SplitConfig, pieces: bool, time_budget: float | None):
        super().__init__()
        self._config = config
        self._pieces = pieces
        self._time_budget = time_budget

    def process(self, keyed):
        trace, parts = keyed
        heads = [p for p in parts if isinstance(p, _Head)]
        decoded = sorted((p for p in parts if isinstance(p, _Decoded)), key=lambda d: d.r)
        head = heads[0]
        problem = head.problem or next((d.failure for d in decoded if d.failure), None)
        if problem is None and [d.r for d in decoded] != list(range(head.ranges)):
            problem = "a range was not decoded"
        if len(heads) > 1:  # matched twice (two patterns): split whole, as often as matched
            yield from (beam.pvalue.TaggedOutput(WHOLE, other.file) for other in heads[1:])
            problem = "matched more than once"
        outputs = None
        if problem is None:
            try:
                outputs = self._decide(head, decoded)
            except Exception:  # noqa: BLE001 - NotParallel or any: split whole, as ever
                outputs = None
        if outputs is None or not self._pieces:
            _remove_scratch(head.scratch)
        if outputs is None:
            yield beam.pvalue.TaggedOutput(WHOLE, head.file)
            return
        yield from outputs

    def _decide(self, head: _Head, decoded: list) -> list:
        started = time.perf_counter()
        local = tempfile.mkdtemp(dir=self._scratch_root)
        try:
            splitter = new_splitter(replace(self._config.options, keep_events=self._pieces),
                                    spill_dir=local)
            segments = None
            if self._pieces:
                segments = _Segments(PieceWriter(local, **self._config.writer_options))
            reader = _ScratchRanges(head, decoded)
            with time_budget_stop(self._time_budget) as stop:
                outcome = read_through(head.file.path, splitter, name=head.file.path,
                                       stop=stop, reader=reader,
                                       on_pairs=segments.add if segments else None)
            account = SplitterAccount.of(splitter, outcome.stats)
        finally:
            shutil.rmtree(local, ignore_errors=True)
        seconds = head.seconds + sum(d.seconds for d in decoded) + time.perf_counter() - started
        if segments is None:
            return [beam.pvalue.TaggedOutput(_DONE, RangedSplit(
                head.file, account, outcome.reader_info, outcome.error, outcome.stopped,
                head.ranges, seconds=seconds))]
        level = self._config.writer_options["compresslevel"] if self._config.compress else None
        path = head.file.path
        outputs = [beam.pvalue.TaggedOutput(_WRITES, (path, (head.scratch, _WriteTask(
            r, found, level)))) for r, found in sorted(segments.by_range.items())]
        outputs.append((path, _Plan(head, account, outcome.reader_info, outcome.error,
                                    outcome.stopped, reader.header_before, reader.header_after,
                                    segments.metadata, segments.owners, seconds)))
        return outputs


class _WriteFn(beam.DoFn):
    """A range's write task in; its segments joined and deflated into its segment file
    (``.segments``); ``(trace, _Written)`` out."""

    def process(self, keyed):
        trace, (scratch, task) = keyed
        started = time.perf_counter()
        text = _read_file(_scratch_file(scratch, task.r, "json"))
        spans = np.load(io.BytesIO(_read_file(_scratch_file(scratch, task.r, "offsets"))))
        entries, encoded, at = [], [], 0
        for seq, separated, indices in task.segments:
            raws = [text[a:b] for a, b in spans[indices].tolist()]
            data, crc, size = encode_segment(segment_text(raws, separated), task.level)
            entries.append((seq, at, len(data), crc, size))
            encoded.append(data)
            at += len(data)
        _write_file(_scratch_file(scratch, task.r, "segments"), b"".join(encoded))
        yield trace, _Written(task.r, entries, time.perf_counter() - started)


class _AssembleFn(ScratchFn):
    """A trace's plan and written ranges in (grouped by the trace); its pieces and manifest
    assembled and copied under ``pieces_prefix``; its ``RangedSplit`` out."""

    def __init__(self, config: SplitConfig, pieces_prefix: str):
        super().__init__()
        self._config = config
        self._pieces_prefix = pieces_prefix

    def process(self, keyed):
        trace, parts = keyed
        plan = next(p for p in parts if isinstance(p, _Plan))
        written = [p for p in parts if isinstance(p, _Written)]
        started = time.perf_counter()
        local = tempfile.mkdtemp(dir=self._scratch_root)
        done = RangedSplit(plan.head.file, plan.account, plan.reader_info, plan.error,
                           plan.stopped, plan.head.ranges)
        try:
            pieces_local = os.path.join(local, "pieces")
            os.mkdir(pieces_local)
            manifest = self._assemble(pieces_local, plan, written)
            done.files = {it["index"]: it["file"] for it in manifest["iterations"]
                          if it["file"]}
            done.pieces = FileSystems.join(self._pieces_prefix, pieces_dir_name(trace))
            copy_out(pieces_local, done.pieces)
        except OSError:
            raise  # storage: the runner retries the bundle
        except Exception as e:  # noqa: BLE001 - one trace must not fail the archive
            done.failure = _one_line(e)
        finally:
            shutil.rmtree(local, ignore_errors=True)
        _remove_scratch(plan.head.scratch)
        done.seconds = (plan.seconds + sum(w.seconds for w in written)
                        + time.perf_counter() - started)
        yield done

    def _assemble(self, out_dir: str, plan: _Plan, written: list) -> dict:
        writer = PieceWriter(out_dir, **self._config.writer_options)
        try:
            writer.add_many(plan.metadata)
            places = {}
            for found in written:
                for seq, *where in found.entries:
                    places[seq] = (found.r, *where)
            with _SegmentFiles(plan.head.scratch) as files:
                batch, size = [], 0
                for seq, owner in enumerate(plan.owners):
                    r, offset, length, crc, n = places[seq]
                    batch.append((owner, files.read(r, offset, length), crc, n))
                    size += length
                    if size >= _ENCODED_BATCH:
                        writer.add_encoded(batch)
                        batch, size = [], 0
                writer.add_encoded(batch)
        except BaseException:
            writer.discard()
            raise
        return finish_folder(writer, plan.account, plan, self._config,
                             source=plan.head.file.path, reader_info=plan.reader_info,
                             error=plan.error, stats=plan.account.stats)


class _SegmentFiles:
    """The ranges' segment files, read at given offsets, a few kept open."""

    def __init__(self, scratch: str):
        self._scratch = scratch
        self._open: OrderedDict = OrderedDict()

    def read(self, r: int, offset: int, length: int) -> bytes:
        handle = self._open.get(r)
        if handle is None:
            if len(self._open) >= _OPEN_SEGMENT_FILES:
                self._open.popitem(last=False)[1].close()
            handle = self._open[r] = FileSystems.open(
                _scratch_file(self._scratch, r, "segments"),
                compression_type=CompressionTypes.UNCOMPRESSED)
        else:
            self._open.move_to_end(r)
        handle.seek(offset)
        return handle.read(length)

    def __enter__(self) -> "_SegmentFiles":
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._open.values():
            handle.close()


class RangedOutputs(NamedTuple):
    """What ``SplitInRanges`` gives: ``done`` (``RangedSplit``), ``whole`` (``FileMetadata``
    of the traces to split as one stream)."""
    done: beam.PCollection
    whole: beam.PCollection


class SplitInRanges(beam.PTransform):
    """Large traces (``FileMetadata``) in, each split across the workers (see the module
    docstring); ``RangedOutputs`` out. ``pieces_prefix``: where pieces go (None: records
    only); ``scratch_prefix``: where the ranges' files go while a trace is split (every
    worker must reach it); ``time_budget``: seconds the engine's run may take."""

    def __init__(self, config: SplitConfig, *, scratch_prefix: str,
                 pieces_prefix: str | None = None, time_budget: float | None = None,
                 range_bytes: int = RANGE_BYTES):
        super().__init__()
        self._config = config
        self._scratch_prefix = scratch_prefix
        self._pieces_prefix = pieces_prefix
        self._time_budget = time_budget
        self._range_bytes = range_bytes

    def expand(self, files):
        max_event_bytes = self._config.max_event_bytes
        cut = files | "Cut" >> beam.ParDo(_CutFn(
            self._scratch_prefix, self._range_bytes, max_event_bytes)).with_outputs(
                _HEADS, main=_RANGES)
        decoded = (cut[_RANGES]
                   | "SpreadRanges" >> beam.Reshuffle()
                   | "Decode" >> beam.ParDo(_DecodeFn(max_event_bytes)))
        pieces = self._pieces_prefix is not None
        decided = (
            (cut[_HEADS], decoded)
            | "HeadsAndRanges" >> beam.Flatten()
            | "ByTrace" >> beam.GroupByKey()
            | "Decide" >> beam.ParDo(_DecideFn(self._config, pieces, self._time_budget))
            .with_outputs(WHOLE, _WRITES, _DONE, main="plans"))
        if not pieces:
            return RangedOutputs(decided[_DONE], decided[WHOLE])
        written = (decided[_WRITES]
                   | "SpreadWrites" >> beam.Reshuffle()
                   | "Write" >> beam.ParDo(_WriteFn()))
        assembled = (
            (decided["plans"], written)
            | "PlansAndWritten" >> beam.Flatten()
            | "PlanByTrace" >> beam.GroupByKey()
            | "Assemble" >> beam.ParDo(_AssembleFn(self._config, self._pieces_prefix)))
        done = (decided[_DONE], assembled) | "Done" >> beam.Flatten()
        return RangedOutputs(done, decided[WHOLE])
