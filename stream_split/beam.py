"""Apache Beam adapter: split every trace of an archive, one trace file per unit of work.

``SplitTraces`` takes a PCollection of file patterns (or of matched ``FileMetadata``), matches
them, spreads the files over the workers (``Reshuffle``) and runs each trace through
``stream_split.run.drive`` inside ``SplitTraceFn``. Out come per-iteration records (the
schema of ``IterationRecord.to_dict()`` plus ``"trace"``), one summary per trace and a
dead-letter record per trace that could not be read as a trace.

What it must never do: turn events into Beam elements (a shuffle moves ~47 k elements/s; a
trace has millions of events), or repeat the logic of ``drive``. Events stay inside the
per-file step; only records, a few per iteration, leave it.
"""
from __future__ import annotations

try:
    import apache_beam as beam
    from apache_beam.io import fileio
    from apache_beam.io.filesystem import CompressionTypes, FileMetadata
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.metrics import Metrics
except ImportError as _error:  # pragma: no cover - depends on the installation
    raise ImportError(
        "stream_split.beam needs Apache Beam: pip install 'stream-split[beam]'") from _error

import hashlib
import os
import shutil
import tempfile
from dataclasses import replace

from stream_split.core import IterationRecord, KIND_IDLE, KIND_ITERATION, SplitOptions
from stream_split.read import TraceInputError, TraceReader, require_backend
from stream_split.run import drive, new_splitter, reader_info
from stream_split.write import PieceWriter, finish_split

__all__ = ["SplitTraces", "SplitTraceFn", "SummarizeGroups", "ITERATIONS", "SUMMARIES",
           "DEAD_LETTERS", "METRICS_NAMESPACE", "trace_summary", "trace_group",
           "iteration_parquet_schema", "parquet_row"]

#: Output tags of ``SplitTraceFn`` (and attribute names on the result of ``SplitTraces``).
ITERATIONS = "iterations"
SUMMARIES = "summaries"
DEAD_LETTERS = "dead_letters"

METRICS_NAMESPACE = "stream_split"

_TRACE_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json.zst", ".json",
                   ".jsonl.gz", ".jsonl", ".gz", ".zst")


def _quantile(sorted_values: list, q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default ``percentile``)."""
    if not sorted_values:
        return None
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def trace_summary(trace: str, records: list[IterationRecord], *, info: dict,
                  error: str | None, events_in: int = 0, events_out: int = 0,
                  metadata_events: int = 0, invalid_events: int = 0,
                  pieces: str | None = None) -> dict:
    """The per-trace summary: counts, iteration time (median, p90) and GPU busy share."""
    iterations = [r for r in records if r.kind == KIND_ITERATION]
    durations = sorted(r.duration_us for r in iterations)
    total = sum(durations)
    median = _quantile(durations, 0.5)
    p90 = _quantile(durations, 0.9)
    return {
        "trace": trace,
        "iterations": len(iterations),
        "idle": sum(1 for r in records if r.kind == KIND_IDLE),
        "median_iteration_us": None if median is None else round(median, 3),
        "p90_iteration_us": None if p90 is None else round(p90, 3),
        "gpu_busy_share": (round(sum(r.gpu_busy_us for r in iterations) / total, 6)
                           if total > 0 else None),
        "complete": bool(info.get("complete")) and error is None,
        "stop_reason": error or info.get("stop_reason"),
        "events_in": events_in,
        "metadata_events": metadata_events,
        "events_out": events_out,
        "invalid_events": invalid_events,
        "error": error,
        "pieces": pieces,
    }


def _trace_stem(path: str) -> str:
    name = FileSystems.split(path)[1]
    for suffix in _TRACE_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _pieces_dir_name(path: str) -> str:
    """``<stem>-<hash>``: the stem alone collides across an archive (rank0 of every job)."""
    return f"{_trace_stem(path)}-{hashlib.sha1(path.encode('utf-8')).hexdigest()[:8]}"


class SplitTraceFn(beam.DoFn):
    """One trace file in, its records out: the whole file is streamed through the core here.

    Main output: per-iteration record dicts; tagged ``summaries``: one summary dict per trace;
    tagged ``dead_letters``: ``{"trace", "error"}`` for a trace that is not readable as one
    (its summary, with the error, is still emitted, as are the records decided before the
    error). A truncated trace (a killed writer) is not a dead letter: its records are
    emitted with ``complete: False`` and its summary says ``complete: False``.

    Errors of the file system itself (a transient storage error, a file deleted since it was
    matched) are raised, so that the runner retries the bundle as it does for any I/O.
    """

    def __init__(self, options: SplitOptions | None = None, *, pieces_prefix: str | None = None,
                 compress_pieces: bool = True):
        self._options = options or SplitOptions()
        self._pieces_prefix = pieces_prefix
        self._compress_pieces = compress_pieces
        self._traces = Metrics.counter(METRICS_NAMESPACE, "traces")
        self._events = Metrics.counter(METRICS_NAMESPACE, "events")
        self._iterations = Metrics.counter(METRICS_NAMESPACE, "iterations")
        self._failures = Metrics.counter(METRICS_NAMESPACE, "failures")
        self._incomplete = Metrics.counter(METRICS_NAMESPACE, "incomplete_traces")
        self._scratch_root = None

    def setup(self):
        # Per worker, not pickled with the DoFn: the parser backend check (fail at start,
        # not on every trace) and the local scratch directory for spill and piece spool files.
        require_backend()
        self._scratch_root = tempfile.mkdtemp(prefix="stream-split-beam-")

    def teardown(self):
        if self._scratch_root:
            shutil.rmtree(self._scratch_root, ignore_errors=True)
            self._scratch_root = None

    def process(self, file):
        path = file.path if isinstance(file, FileMetadata) else str(file)
        scratch = tempfile.mkdtemp(dir=self._scratch_root)
        try:
            yield from self._isolated(path, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _isolated(self, path: str, scratch: str) -> list:
        """One trace's outputs, all or none: any failure while splitting it (a bug it
        triggers included) makes it a dead letter with its error, and the job goes on.
        Storage errors (``OSError``) are raised, for the runner to retry the bundle."""
        try:
            return list(self._split_one(path, scratch))
        except OSError:
            raise
        except Exception as e:  # noqa: BLE001 - one trace must not fail the archive
            error = f"{type(e).__name__}: {e}".splitlines()[0]
            self._traces.inc()
            self._failures.inc()
            return [beam.pvalue.TaggedOutput(SUMMARIES, trace_summary(
                        path, [], info=reader_info(None), error=error)),
                    beam.pvalue.TaggedOutput(DEAD_LETTERS, {"trace": path, "error": error})]

    def _split_one(self, path: str, scratch: str):
        writing = self._pieces_prefix is not None
        options = replace(self._options, keep_events=writing, hold_serialized=writing)
        splitter = new_splitter(options, spill_dir=scratch)
        pieces_local = os.path.join(scratch, "pieces")
        writer = None
        if writing:
            os.makedirs(pieces_local)
            writer = PieceWriter(pieces_local, compress=self._compress_pieces)
        reader = None
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as stream:
            # UNCOMPRESSED: the reader detects gzip / zstd from the bytes, as it does for files.
            try:
                reader = TraceReader(stream, name=path)
            except TraceInputError as e:  # not readable at all (not JSON, corrupt gzip, ...)
                splitter.close()
                error, info = str(e), reader_info(None)
            else:
                outcome = drive(reader, splitter,
                                on_pairs=writer.add_many if writer is not None else None)
                error, info = outcome.error, outcome.reader_info

        records = splitter.iterations
        pieces_dir = files = None
        if writer is not None and reader is not None:  # nothing to write for an unreadable file
            manifest = finish_split(writer, splitter, reader, source=path, reader_info=info,
                                    error=error)
            files = {it["index"]: it["file"] for it in manifest["iterations"] if it["file"]}
            pieces_dir = FileSystems.join(self._pieces_prefix, _pieces_dir_name(path))
            _copy_out(pieces_local, pieces_dir)

        complete = bool(info.get("complete")) and error is None
        self._traces.inc()
        self._events.inc(splitter.events_in)
        if error is not None:
            self._failures.inc()
        elif not complete:
            self._incomplete.inc()

        for record in records:
            out = record.to_dict()
            out["trace"] = path
            if files is not None:
                out["file"] = FileSystems.join(pieces_dir, files[record.index])
            if record.kind == KIND_ITERATION:
                self._iterations.inc()
            yield out
        yield beam.pvalue.TaggedOutput(SUMMARIES, trace_summary(
            path, records, info=info, error=error, events_in=splitter.events_in,
            events_out=splitter.events_out, metadata_events=splitter.metadata_events,
            invalid_events=splitter.invalid_events, pieces=pieces_dir))
        if error is not None:
            yield beam.pvalue.TaggedOutput(DEAD_LETTERS, {"trace": path, "error": error})


def _copy_out(local_dir: str, dest_dir: str) -> None:
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


def _is_metadata(element) -> bool:
    return isinstance(element, FileMetadata)


class SplitTraces(beam.PTransform):
    """Split every trace matched by a PCollection of patterns (str) or of ``FileMetadata``.

    Returns a ``DoOutputsTuple``: ``.iterations`` (record dicts), ``.summaries`` (one dict per
    trace) and ``.dead_letters`` (``{"trace", "error"}``)::

        out = (p | beam.Create(["gs://bucket/traces/**/*.json.gz"])
                 | "SplitTraces" >> SplitTraces(SplitOptions(detector="steps")))
        out.iterations | beam.Map(json.dumps) | beam.io.WriteToText(...)
    """

    def __init__(self, options: SplitOptions | None = None, *, pieces_prefix: str | None = None,
                 compress_pieces: bool = True,
                 empty_match_treatment=fileio.EmptyMatchTreatment.ALLOW_IF_WILDCARD):
        super().__init__()
        self._options = options or SplitOptions()
        self._pieces_prefix = pieces_prefix
        self._compress_pieces = compress_pieces
        self._empty_match_treatment = empty_match_treatment

    def expand(self, files):
        # Patterns are matched; already matched files pass through (no second stat each).
        patterns, matched = files | "ByKind" >> beam.Partition(
            lambda element, _: 1 if _is_metadata(element) else 0, 2)
        new = patterns | "Match" >> fileio.MatchAll(self._empty_match_treatment)
        return (
            (new, matched)
            | "AllFiles" >> beam.Flatten()
            # Matching runs where the patterns are (often one worker); spread the files.
            | "Spread" >> beam.Reshuffle()
            | "Split" >> beam.ParDo(SplitTraceFn(
                self._options, pieces_prefix=self._pieces_prefix,
                compress_pieces=self._compress_pieces)).with_outputs(
                    SUMMARIES, DEAD_LETTERS, main=ITERATIONS))


def trace_group(trace: str) -> str:
    """The group of a trace: its parent directory (one job, one run, one rank set...)."""
    return FileSystems.split(trace)[0]


class _GroupStats(beam.CombineFn):
    """Per group: traces, failed traces, iterations, median of the per-trace medians."""

    def create_accumulator(self):
        return [0, 0, 0, []]

    def add_input(self, acc, summary):
        acc[0] += 1
        acc[1] += summary.get("error") is not None
        acc[2] += summary.get("iterations") or 0
        if summary.get("median_iteration_us") is not None:
            acc[3].append(summary["median_iteration_us"])
        return acc

    def merge_accumulators(self, accumulators):
        out = self.create_accumulator()
        for acc in accumulators:
            out[0] += acc[0]
            out[1] += acc[1]
            out[2] += acc[2]
            out[3].extend(acc[3])
        return out

    def extract_output(self, acc):
        median = _quantile(sorted(acc[3]), 0.5)
        return {"traces": acc[0], "failed_traces": acc[1], "iterations": acc[2],
                "median_of_median_iteration_us": None if median is None else round(median, 3)}


class SummarizeGroups(beam.PTransform):
    """Per-trace summaries in, one record per trace group (parent directory) out."""

    def expand(self, summaries):
        return (
            summaries
            | "ByGroup" >> beam.Map(lambda s: (trace_group(s["trace"]), s))
            | "Combine" >> beam.CombinePerKey(_GroupStats())
            | "ToRecord" >> beam.MapTuple(lambda group, stats: {"group": group, **stats}))


def iteration_parquet_schema():
    """The pyarrow schema of the iteration records (``IterationRecord.to_dict()`` + trace)."""
    import pyarrow as pa
    return pa.schema([
        ("trace", pa.string()),
        ("type", pa.string()),
        ("index", pa.int64()),
        ("kind", pa.string()),
        ("start_ts", pa.float64()),
        ("end_ts", pa.float64()),
        ("duration_us", pa.float64()),
        ("first_op", pa.string()),
        ("events", pa.int64()),
        ("cpu_ops", pa.int64()),
        ("launches", pa.int64()),
        ("kernels", pa.int64()),
        ("gpu_events", pa.int64()),
        ("gpu_busy_us", pa.float64()),
        ("gpu_start_ts", pa.float64()),
        ("gpu_end_ts", pa.float64()),
        ("complete", pa.bool_()),
        ("file", pa.string()),
    ])


def parquet_row(record: dict, names: tuple) -> dict:
    """The columns of ``names`` from a record (extra keys dropped, missing ones null)."""
    return {name: record.get(name) for name in names}
