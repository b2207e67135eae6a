"""Apache Beam adapter: split every trace of an archive, one trace file per unit of work.

``SplitTraces`` takes a PCollection of file patterns (or of matched ``FileMetadata``), matches
them, ranks the files by size and deals them over the workers, largest first, and runs each
trace inside ``_SplitTraceFn`` through the paths every front end takes:
``folder.split_to_folder`` (with pieces) or ``run.read_through`` (records only). Out come three
PCollections (``SplitOutputs``), of dicts so that any sink takes them:

- ``iterations``: one dict per iteration, the keys of ``IterationRecord.to_dict()``
  (``core.records.iteration_fields()``, the one schema source) plus ``"trace"``;
- ``summaries``: one dict per trace (``trace_summary``), with the trace's size in ``bytes``
  and the ``seconds`` it took;
- ``dead_letters``: ``{"trace", "error"}`` per file that could not be read as a trace: an
  unreadable one, anything a local pattern names that is no regular file (a directory, a
  dangling link or a link loop, which Beam's match leaves out; a FIFO or a Unix socket, never
  opened), and a trace that took longer than ``time_budget`` seconds. The job always ends.

What it must never do: turn events into Beam elements (a shuffle moves ~47 k elements/s; a
trace has millions of events), or repeat the logic of ``drive``. Events stay inside the
per-file step; only records, a few per iteration, leave it.

One huge trace: with ``split_large_over``, a trace larger than that is split across the
workers instead (``stream_split.beam_ranges.SplitInRanges``: ranges decoded and pieces
written by maps, boundaries decided by a reduce; its events stay in files), with the same
outputs; ``_RangedOutputsFn`` makes them, as ``_SplitTraceFn`` does for a trace split whole.

Runners. The transform is plain Beam (a multi-output ``ParDo``, ``Partition``,
``GroupByKey``), idiomatic on every runner, and tested on the DirectRunner (in process and
``multi_processing``), the FnApiRunner and a ``dask.distributed`` cluster. Beam 2.77's own
Dask runner cannot run it (nor most pipelines): it computes only the last leaf, hands every
tag of a multi-output ``ParDo`` to every consumer, and never spreads work over its workers.
Rather than bending this transform into the shape that runner happens to survive (one
``(kind, record)`` stream, one writing step: a transform users could no longer compose, and
whose outputs would still be mixed the moment a user added a second leaf), the project ships
those runner defects fixed, in ``stream_split.dask_runner``, pinned to the Beam versions it
was checked on. ``SplitTraces`` refuses Beam's unfixed ``DaskRunner`` with a message naming
the fixed one.

Largest first: the files are gathered (paths and sizes only) and ranked by size, and the rank
is the key of the shuffle that spreads them. Runners that hand out groups in key order (the
DirectRunner's: round-robin to its workers) and the fixed Dask runner (rank ``r`` to
partition ``r % n``) then start the largest traces first and give each worker a share of
large and small ones, so a large trace is not left to start last behind many small ones.
Other runners (Dataflow, Flink, Spark) choose their own order; the ranking costs them one
small shuffle.
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

import errno
import glob
import os
import posixpath
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Union

from stream_split.core import IterationRecord, KIND_IDLE, KIND_ITERATION, SplitOptions
from stream_split.core.records import iteration_fields
from stream_split.beam_ranges import (
    RANGE_BYTES, ScratchFn, SplitInRanges, copy_out, pieces_dir_name, time_budget_stop)
from stream_split.config import SplitConfig
from stream_split.folder import split_to_folder
from stream_split.run import StopRequest, new_splitter, read_through, reader_info
from stream_split.stats import quantile

__all__ = ["SplitTraces", "SplitOutputs", "SummarizeGroups", "ITERATIONS", "SUMMARIES",
           "DEAD_LETTERS", "METRICS_NAMESPACE", "IterationRow", "SummaryRow", "DeadLetterRow",
           "trace_summary", "trace_group", "iteration_parquet_schema", "parquet_row"]

#: Output tags of ``_SplitTraceFn`` (and attribute names on the result of ``SplitTraces``).
ITERATIONS = "iterations"
SUMMARIES = "summaries"
DEAD_LETTERS = "dead_letters"

#: Element types of the three outputs. Dicts, not dataclasses: every sink (JSON, Parquet,
#: BigQuery) takes them as they are. Keys: ``IterationRow``: ``core.records.iteration_fields()``
#: plus ``"trace"``; ``SummaryRow``: those of ``trace_summary``; ``DeadLetterRow``:
#: ``"trace"`` and ``"error"``.
IterationRow = dict[str, Any]
SummaryRow = dict[str, Any]
DeadLetterRow = dict[str, str]

METRICS_NAMESPACE = "stream_split"

#: Beam's own Dask runner, which cannot run ``SplitTraces`` (``stream_split.dask_runner``
#: says why, and is the fixed one).
BEAM_DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"

def _active_share(iterations: list[IterationRecord]) -> float | None:
    """GPU active time (union of streams) over the GPU's timeline, from the iterations'
    first GPU work to their last: the share of it some stream was busy, at most 1 (the
    active pieces are disjoint and lie inside it). The GPU may trail the CPU by several
    iterations, so wall time of the CPU windows would be the wrong denominator."""
    on_gpu = [r for r in iterations if r.gpu_start_ts is not None]
    if not on_gpu:
        return None
    span = max(r.gpu_end_ts for r in on_gpu) - min(r.gpu_start_ts for r in on_gpu)
    return round(sum(r.gpu_active_us for r in on_gpu) / span, 6) if span > 0 else None


def trace_summary(trace: str, records: list[IterationRecord], *, info: dict,
                  error: str | None, events_in: int = 0, events_out: int = 0,
                  metadata_events: int = 0, invalid_events: int = 0,
                  pieces: str | None = None, size_bytes: int | None = None,
                  ranges: int | None = None) -> dict:
    """The per-trace summary: counts, iteration time (median, p90), GPU busy share, and the
    trace's size (``bytes``, as stored), the ``ranges`` it was split across the workers in
    (None: split as one stream) and splitting time (``seconds``, in the worker: set
    by the caller that timed the work)."""
    iterations = [r for r in records if r.kind == KIND_ITERATION]
    durations = sorted(r.duration_us for r in iterations)
    total = sum(durations)
    median = quantile(durations, 0.5)
    p90 = quantile(durations, 0.9)
    return {
        "trace": trace,
        "iterations": len(iterations),
        "idle": sum(1 for r in records if r.kind == KIND_IDLE),
        "median_iteration_us": None if median is None else round(median, 3),
        "p90_iteration_us": None if p90 is None else round(p90, 3),
        # GPU active time (union of streams) over the GPU's timeline: at most 1.
        "gpu_busy_share": _active_share(iterations),
        # Busy time summed over streams, over wall time: above 1 with concurrent streams.
        "gpu_stream_busy_ratio": (round(sum(r.gpu_busy_us for r in iterations) / total, 6)
                                  if total > 0 else None),
        "complete": bool(info.get("complete")) and error is None,
        "stop_reason": error or info.get("stop_reason"),
        "events_in": events_in,
        "metadata_events": metadata_events,
        "events_out": events_out,
        "invalid_events": invalid_events,
        "error": error,
        "pieces": pieces,
        "bytes": size_bytes,
        "ranges": ranges,
        "seconds": None,
    }


@dataclass
class _TraceResult:
    """What splitting one trace produced, before it is emitted."""
    rows: list[IterationRow]
    summary: SummaryRow
    error: str | None


class _SplitTraceFn(ScratchFn):
    """One trace file in, its records out: the whole file is streamed through the core here.

    Main output: ``IterationRow`` per iteration; tagged ``summaries``: one ``SummaryRow`` per
    trace; tagged ``dead_letters``: a ``DeadLetterRow`` for a trace that is not readable as
    one (its summary, with the error, is still emitted, as are the records decided before
    the error). A truncated trace (a killed writer) is not a dead letter: its records are
    emitted with ``complete: False`` and its summary says ``complete: False``.

    A path that cannot be read whole (``file_problem``: a FIFO, a socket, an unreadable
    file; or an error a retry cannot cure, ``_PERMANENT_ERRORS``) is a dead letter; other
    errors of the file system (a transient storage error) are raised, so that the runner
    retries the bundle as it does for any I/O. ``time_budget``: seconds a trace may take,
    after which it stops between two batches and is a dead letter (its records decided so
    far still come out).
    """
    scratch_prefix = "stream-split-beam-"

    def __init__(self, options: SplitOptions | None = None, *, pieces_prefix: str | None = None,
                 compress_pieces: bool = True, time_budget: float | None = None):
        self._options = options or SplitOptions()
        self._pieces_prefix = pieces_prefix
        self._compress_pieces = compress_pieces
        self._time_budget = time_budget
        self._traces = Metrics.counter(METRICS_NAMESPACE, "traces")
        self._events = Metrics.counter(METRICS_NAMESPACE, "events")
        self._iterations = Metrics.counter(METRICS_NAMESPACE, "iterations")
        self._failures = Metrics.counter(METRICS_NAMESPACE, "failures")
        self._incomplete = Metrics.counter(METRICS_NAMESPACE, "incomplete_traces")
        super().__init__()

    def process(self, file: FileMetadata | str):
        path, size = (file.path, file.size_in_bytes) if isinstance(file, FileMetadata) else (
            str(file), None)
        scratch = tempfile.mkdtemp(dir=self._scratch_root)
        try:
            outputs = self._isolated(path, size, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        yield from outputs

    def _isolated(self, path: str, size: int | None, scratch: str) -> list:
        """One trace's outputs, all or none: any failure while splitting it (a bug it
        triggers included) makes it a dead letter with its error, and the job goes on.
        Storage errors (``OSError``) are raised, for the runner to retry the bundle."""
        started = time.perf_counter()
        try:
            problem = file_problem(path)
            if problem is not None:
                raise _NotATraceFile(problem)
            result = self._split_one(path, size, scratch)
        except OSError as e:
            if e.errno not in _PERMANENT_ERRORS:
                raise
            error = f"cannot read {path}: {e.strerror or e}"
            result = self._failed(path, size, error)
        except Exception as e:  # noqa: BLE001 - one trace must not fail the archive
            error = str(e) if isinstance(e, _NotATraceFile) else \
                f"{type(e).__name__}: {e}".splitlines()[0]
            result = self._failed(path, size, error)
        # The whole unit of work: reading, splitting and copying the pieces out.
        return self._outputs(path, result, time.perf_counter() - started)

    @staticmethod
    def _outputs(path: str, result: _TraceResult, seconds: float) -> list:
        """A trace's rows, its summary (which took ``seconds``), its dead letter if any."""
        result.summary["seconds"] = round(seconds, 3)
        outputs = [*result.rows, beam.pvalue.TaggedOutput(SUMMARIES, result.summary)]
        if result.error is not None:
            outputs.append(beam.pvalue.TaggedOutput(
                DEAD_LETTERS, {"trace": path, "error": result.error}))
        return outputs

    def _failed(self, path: str, size: int | None, error: str) -> _TraceResult:
        self._traces.inc()
        self._failures.inc()
        return _TraceResult([], trace_summary(path, [], info=reader_info(None), error=error,
                                              size_bytes=size), error)

    def _split_one(self, path: str, size: int | None, scratch: str) -> _TraceResult:
        with time_budget_stop(self._time_budget) as stop:
            result = self._split_within(path, size, scratch, stop)
        self._note_budget(result, stop.requested)
        return result

    def _note_budget(self, result: _TraceResult, stopped: bool) -> None:
        """A trace the time budget stopped is a dead letter."""
        if stopped and result.error is None:
            result.error = result.summary["error"] = (
                f"took longer than its time budget of {self._time_budget:g} s")
            self._failures.inc()

    def _split_within(self, path: str, size: int | None, scratch: str,
                      stop: StopRequest) -> _TraceResult:
        pieces_dir = files = None
        # UNCOMPRESSED: the reader detects gzip / zstd from the bytes, as it does for files.
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as stream:
            if self._pieces_prefix is None:  # records only
                splitter = new_splitter(replace(self._options, keep_events=False),
                                        spill_dir=scratch)
                outcome = read_through(stream, splitter, name=path, stop=stop)
                error, info = outcome.error, outcome.reader_info
            else:
                pieces_local = os.path.join(scratch, "pieces")
                os.makedirs(pieces_local)
                config = SplitConfig(options=self._options, compress=self._compress_pieces)
                result = split_to_folder(stream, pieces_local, config, name=path,
                                         in_place=True, stop=stop)
                splitter, error, info = result.splitter, result.error, result.reader_info
                if result.opened:  # nothing to copy for an unreadable file
                    files = {it["index"]: it["file"] for it in result.manifest["iterations"]
                             if it["file"]}
                    pieces_dir = FileSystems.join(self._pieces_prefix, pieces_dir_name(path))
                    copy_out(pieces_local, pieces_dir)
        return self._trace_result(path, size, splitter, info, error, pieces_dir, files)

    def _trace_result(self, path: str, size: int | None, splitter, info: dict,
                      error: str | None, pieces_dir: str | None, files: dict | None,
                      ranges: int | None = None) -> _TraceResult:
        """A trace's rows and summary from its closed ``splitter`` (or its
        ``SplitterAccount``), counted in the metrics; ``files``: {index: piece} in
        ``pieces_dir``; ``ranges``: how many it was split in."""
        records = splitter.iterations
        complete = bool(info.get("complete")) and error is None
        self._traces.inc()
        self._events.inc(splitter.events_in)
        if error is not None:
            self._failures.inc()
        elif not complete:
            self._incomplete.inc()

        rows = []
        for record in records:
            row = record.to_dict()
            row["trace"] = path
            if files is not None:
                row["file"] = FileSystems.join(pieces_dir, files[record.index])
            if record.kind == KIND_ITERATION:
                self._iterations.inc()
            rows.append(row)
        summary = trace_summary(
            path, records, info=info, error=error, events_in=splitter.events_in,
            events_out=splitter.events_out, metadata_events=splitter.metadata_events,
            invalid_events=splitter.invalid_events, pieces=pieces_dir, size_bytes=size,
            ranges=ranges)
        return _TraceResult(rows, summary, error)


class _RangedOutputsFn(_SplitTraceFn):
    """A trace split across the workers (``beam_ranges.RangedSplit``) in; its outputs out, as
    ``_SplitTraceFn`` makes them. Its ``seconds``: the work of every step, summed."""

    def process(self, done):
        path, size = done.file.path, done.file.size_in_bytes
        if done.failure is not None:
            result = self._failed(path, size, done.failure)
        else:
            result = self._trace_result(path, size, done.account, done.reader_info,
                                        done.error, done.pieces, done.files, done.ranges)
            self._note_budget(result, done.stopped)
        yield from self._outputs(path, result, done.seconds)


class _NotATraceFile(Exception):
    """A matched path that is no regular, readable file (``file_problem``)."""


#: Errors of a path that a retry cannot cure: the file is a dead letter, not a retry.
_PERMANENT_ERRORS = {errno.ENOENT, errno.EACCES, errno.EPERM, errno.ELOOP, errno.EISDIR,
                     errno.ENOTDIR, errno.ENAMETOOLONG, errno.ENXIO}


def file_problem(path: str) -> str | None:
    """Why the local ``path`` cannot be read whole as a trace file (None: it can, or it is not
    local): a directory, a dangling link, a link loop, a FIFO (reading it could wait forever),
    a socket or a device, an unreadable file."""
    if "://" in path:
        return None
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return "a dangling symbolic link" if os.path.islink(path) else "no such file"
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "a symbolic link loop"
        return f"cannot read it: {e.strerror or e}"
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (a named pipe)"),
             (stat.S_ISSOCK, "a Unix socket"), (stat.S_ISCHR, "a device"),
             (stat.S_ISBLK, "a device"))
    for is_kind, kind in kinds:
        if is_kind(info.st_mode):
            return f"{kind}, not a trace file"
    if not os.access(path, os.R_OK):
        return "permission denied"
    return None


def unmatched_paths(pattern: str) -> list[DeadLetterRow]:
    """Dead letters for what a local ``pattern`` names that Beam's match leaves out: a
    directory, a dangling link, a link loop (a FIFO, a socket or an unreadable file is
    matched, and made a dead letter by ``_SplitTraceFn``)."""
    if "://" in pattern:
        return []
    rows = []
    for path in sorted(glob.glob(pattern, recursive=True)):
        if os.path.isfile(path):
            continue
        problem = file_problem(path)
        if problem is not None and (os.path.isdir(path) or not os.path.exists(path)):
            rows.append({"trace": path, "error": problem})
    return rows


def _is_metadata(element) -> bool:
    return isinstance(element, FileMetadata)


def _ranked_by_size(files) -> list[tuple[int, FileMetadata]]:
    """``(rank, file)``, rank 0 the largest; equal sizes by path, so every run agrees."""
    ordered = sorted(files, key=lambda f: (-(f.size_in_bytes or 0), f.path))
    return list(enumerate(ordered))


class _SpreadBySize(beam.PTransform):
    """Matched files in, the same files out, ranked by size and dealt over the workers.

    Gathering every path and size in one place is cheap (a few hundred bytes a file) next to
    the splitting it schedules. The rank is the key of the spreading shuffle: a unique key per
    file breaks fusion as ``Reshuffle`` does, and runners that hand out groups in key order
    start the largest traces first (see the module docstring).
    """

    def expand(self, files: beam.PCollection[FileMetadata]) -> beam.PCollection[FileMetadata]:
        return (
            files
            | "OneKey" >> beam.Map(lambda file: (None, file))
            | "Gather" >> beam.GroupByKey()
            | "Rank" >> beam.FlatMap(lambda keyed: _ranked_by_size(keyed[1]))
            | "Deal" >> beam.GroupByKey()
            | "Files" >> beam.FlatMap(lambda ranked: ranked[1]).with_output_types(FileMetadata))


class SplitOutputs(NamedTuple):
    """The three outputs of ``SplitTraces`` (element types: see the module docstring)."""
    iterations: beam.PCollection[IterationRow]
    summaries: beam.PCollection[SummaryRow]
    dead_letters: beam.PCollection[DeadLetterRow]


def _refuse_unfixed_dask_runner(pipeline) -> None:
    runner = type(pipeline.runner)
    if f"{runner.__module__}.{runner.__qualname__}" == BEAM_DASK_RUNNER:
        raise ValueError(
            "Beam's own DaskRunner computes only the last output of a pipeline and mixes the "
            "outputs of SplitTraces; use --runner=stream_split.dask_runner.DaskRunner "
            "(pip install 'stream-split[dask]'), the same runner with those defects fixed")


@beam.typehints.with_input_types(Union[str, FileMetadata])
class SplitTraces(beam.PTransform):
    """Split every trace matched by a PCollection of patterns (str) or of ``FileMetadata``.

    Returns ``SplitOutputs``: ``.iterations`` (``IterationRow``), ``.summaries`` (one
    ``SummaryRow`` per trace) and ``.dead_letters`` (``DeadLetterRow``)::

        out = (p | beam.Create(["gs://bucket/traces/**/*.json.gz"])
                 | "SplitTraces" >> SplitTraces(SplitOptions(detector="steps")))
        out.iterations | beam.Map(json.dumps) | beam.io.WriteToText(...)

    ``time_budget``: seconds each trace may take before it becomes a dead letter (None: no
    limit). ``split_large_over``: a trace larger than this many bytes (as stored) is split
    across the workers (``beam_ranges.SplitInRanges``: its ranges decoded and its pieces
    written on every worker, its boundaries decided on one), with the same outputs;
    ``scratch_prefix``: where its ranges' files go meanwhile, a place every worker reaches
    (None: the local temporary folder, for a runner on one machine); ``range_bytes``: the
    JSON text of a range; its ``time_budget`` is the engine's run's.
    """

    def __init__(self, options: SplitOptions | None = None, *, pieces_prefix: str | None = None,
                 compress_pieces: bool = True,
                 empty_match_treatment=fileio.EmptyMatchTreatment.ALLOW_IF_WILDCARD,
                 time_budget: float | None = None, split_large_over: int | None = None,
                 scratch_prefix: str | None = None, range_bytes: int = RANGE_BYTES):
        super().__init__()
        if time_budget is not None and not (isinstance(time_budget, (int, float))
                                            and time_budget > 0):
            raise ValueError(f"time_budget must be a number of seconds > 0, not "
                             f"{time_budget!r}")
        if split_large_over is not None and not (isinstance(split_large_over, int)
                                                 and split_large_over >= 0):
            raise ValueError(f"split_large_over must be a number of bytes >= 0, not "
                             f"{split_large_over!r}")
        self._options = options or SplitOptions()
        self._pieces_prefix = pieces_prefix
        self._compress_pieces = compress_pieces
        self._time_budget = time_budget
        self._empty_match_treatment = empty_match_treatment
        self._split_large_over = split_large_over
        self._scratch_prefix = scratch_prefix or os.path.join(tempfile.gettempdir(),
                                                              "stream-split-ranges")
        self._range_bytes = range_bytes

    def expand(self, files: beam.PCollection[Union[str, FileMetadata]]) -> SplitOutputs:
        _refuse_unfixed_dask_runner(files.pipeline)
        # Patterns are matched; already matched files pass through (no second stat each).
        patterns, matched = files | "ByKind" >> beam.Partition(
            lambda element, _: 1 if _is_metadata(element) else 0, 2)
        new = patterns | "Match" >> fileio.MatchAll(self._empty_match_treatment)
        every = ((new, matched)
                 | "AllFiles" >> beam.Flatten()
                 # Matching runs where the patterns are (often one worker); spread the files.
                 | "Spread" >> _SpreadBySize())
        split_fn = _SplitTraceFn(self._options, pieces_prefix=self._pieces_prefix,
                                 compress_pieces=self._compress_pieces,
                                 time_budget=self._time_budget)
        ranged = None
        if self._split_large_over is not None:
            every, ranged = self._in_ranges(every)
        split = every | "Split" >> _outputs_of(beam.ParDo(split_fn))
        unmatched = patterns | "Unmatched" >> beam.FlatMap(unmatched_paths)
        if ranged is not None:
            split = [(split[tag], ranged[tag]) | f"{tag}AndRanged" >> beam.Flatten()
                     for tag in (ITERATIONS, SUMMARIES, DEAD_LETTERS)]
            split = dict(zip((ITERATIONS, SUMMARIES, DEAD_LETTERS), split))
        dead = (split[DEAD_LETTERS], unmatched) | "DeadLetters" >> beam.Flatten()
        return SplitOutputs(split[ITERATIONS], split[SUMMARIES], dead)

    def _in_ranges(self, files):
        """``(files to split whole, outputs of those split in ranges)``: the traces over
        ``split_large_over`` go through ``SplitInRanges``; those it cannot cut come back."""
        over = self._split_large_over
        small, large = files | "BySize" >> beam.Partition(
            lambda file, _: int((file.size_in_bytes or 0) > over), 2)
        config = SplitConfig(options=self._options, compress=self._compress_pieces)
        ranged = large | "InRanges" >> SplitInRanges(
            config, scratch_prefix=self._scratch_prefix, pieces_prefix=self._pieces_prefix,
            time_budget=self._time_budget, range_bytes=self._range_bytes)
        whole = (small, ranged.whole) | "SmallOrWhole" >> beam.Flatten()
        outputs = ranged.done | "RangedOutputs" >> _outputs_of(beam.ParDo(_RangedOutputsFn(
            self._options, pieces_prefix=self._pieces_prefix,
            compress_pieces=self._compress_pieces, time_budget=self._time_budget)))
        return whole, outputs


def _outputs_of(par_do):
    """A ``ParDo`` of a ``_SplitTraceFn`` with its three outputs."""
    return par_do.with_output_types(
        IterationRow, **{SUMMARIES: SummaryRow, DEAD_LETTERS: DeadLetterRow}
    ).with_outputs(SUMMARIES, DEAD_LETTERS, main=ITERATIONS)


def trace_group(trace: str) -> str:
    """The group of a trace: its parent directory (one job, one run, one rank set...), in
    the form the trace's path has (a relative path stays relative, as in the summaries)."""
    if "://" in trace:  # a URL: always "/"-separated
        return posixpath.dirname(trace)
    return os.path.dirname(trace) or "."


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
        median = quantile(sorted(acc[3]), 0.5)
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
    """The pyarrow schema of ``IterationRow``: ``"trace"``, then ``iteration_fields()``."""
    import pyarrow as pa
    arrow = {int: pa.int64(), float: pa.float64(), str: pa.string(), bool: pa.bool_()}
    return pa.schema([pa.field("trace", pa.string())]
                     + [pa.field(name, arrow[kind]) for name, kind, _ in iteration_fields()])


def parquet_row(record: dict, names: tuple) -> dict:
    """The columns of ``names`` from a record (extra keys dropped, missing ones null)."""
    return {name: record.get(name) for name in names}
