"""Split every trace of an archive with Apache Beam; write records, summaries and failures.

    python -m pipelines.split_archive --input 'traces/**/*.json.gz' --output out/ \
        [--detector steps] [--pieces] [Beam pipeline options, e.g. --runner ...]

Writes, under ``--output`` (a local directory or any Beam file system prefix, e.g. gs://):

- ``iterations.jsonl`` and ``iterations.parquet``: one record per iteration of every trace
  (``IterationRecord.to_dict()`` plus ``trace``), the same records as ``stream-split
  boundaries``;
- ``summaries.jsonl``: one line per trace (iterations, idle cycles, median and p90 iteration
  time, GPU busy share, completeness, event counts, error);
- ``dead_letters.jsonl``: ``{"trace", "error"}`` for every file that is not a readable trace;
- ``groups.jsonl``: per trace group (parent directory): traces, failed traces, iterations,
  median of the per-trace median iteration times;
- with ``--pieces``: ``pieces/<trace stem>-<hash>/`` with the manifest and one Chrome trace per
  iteration, as ``stream-split split`` writes them.

On Dask, ``--runner=stream_split.dask_runner.DaskRunner`` (Beam's own
``--runner=DaskRunner`` is replaced by it: see ``stream_split.dask_runner`` for why) with
``--dask_client_address=tcp://SCHEDULER:8786``.

At the end it prints one line: traces, iterations, failed traces, and where the outputs
are. A run whose ``--input`` patterns match no file warns and exits with status 2 (nothing is
started). Traces that went to the dead letters leave the exit status 0 (an archive job keeps
what it could split, and the line says how many failed) unless ``--fail-on-dead-letters``:
then the status is 1 (``EXIT_DEAD_LETTERS``) when one trace or more failed. Installed as the
``stream-split-archive`` command too. Beam's own logging stays at WARNING (launcher and SDK workers) unless
``--verbose``. Every output names a trace by the path its pattern matched (relative patterns
give relative paths, in ``groups.jsonl`` too).

With ``--split-large-over BYTES``, each trace larger than that is split across the workers
(``stream_split.beam_ranges``: its ranges decoded and its pieces written on all of them, its
boundaries decided on one) with the same outputs; its ranges' files are kept under
``OUTPUT/.ranges/`` meanwhile.

File names are exact (one shard each) unless ``--sharded``, which lets the runner choose the
number of shards and names them ``iterations-00000-of-00004.jsonl`` etc.: use it at scale,
where one writer per output would be the bottleneck.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys

#: Exit status when the input matches no file (as the CLI's bad input).
EXIT_NO_INPUT = 2
#: Exit status with ``--fail-on-dead-letters`` when a trace went to the dead letters.
EXIT_DEAD_LETTERS = 1
#: What Beam logs when it is imported without Google Cloud's client libraries (about BigQuery,
#: which this job never uses): kept off the terminal, before ``--help`` too.
BEAM_IMPORT_NOISE = "apitools not found"
#: The folder under ``--output`` where a trace split across the workers keeps its ranges'
#: files while it is split (every worker reaches the output; removed trace by trace).
RANGES_SCRATCH = ".ranges"
OUTPUT_NAMES = ("iterations.jsonl", "iterations.parquet", "summaries.jsonl",
                "dead_letters.jsonl", "groups.jsonl")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.split_archive",
        description="Split an archive of PyTorch profiler / Kineto traces with Apache Beam. "
                    "Options not listed here are Beam pipeline options (--runner, ...).")
    parser.add_argument("--input", required=True, action="append",
                        help="file pattern of traces (FileSystems syntax, ** for any depth); "
                             "repeat for several")
    parser.add_argument("--output", required=True, help="output directory or prefix")
    parser.add_argument("--detector", choices=("auto", "structure", "steps"), default="auto",
                        help="as for stream-split: auto, structure or steps (ProfilerStep#N)")
    parser.add_argument("--level", type=int, default=None,
                        help="split at a lower level of the repeating structure")
    parser.add_argument("--pieces", action="store_true",
                        help="also write one Chrome trace per iteration under OUTPUT/pieces/")
    parser.add_argument("--split-large-over", type=_size, default=None, metavar="BYTES",
                        help="split each trace larger than BYTES (as stored; 500M, 2G: "
                             "powers of 1024) across the workers: its ranges decoded and its "
                             "pieces written on all of them, its boundaries decided on one, "
                             "with the same outputs (default: every trace on one worker)")
    parser.add_argument("--range-bytes", type=_size, default=None, metavar="BYTES",
                        help="with --split-large-over: the JSON text of a range (default 4M)")
    parser.add_argument("--sharded", action="store_true",
                        help="let the runner shard the outputs (NAME-SSSSS-of-NNNNN.EXT)")
    parser.add_argument("--verbose", action="store_true",
                        help="show Beam's INFO logging (default: warnings only)")
    parser.add_argument("--fail-on-dead-letters", action="store_true",
                        help=f"exit with status {EXIT_DEAD_LETTERS} when a trace could not be "
                             "split (it is in dead_letters.jsonl); by default such traces are "
                             "counted in the final line and the status stays 0")
    return parser


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _size(text: str) -> int:
    """A number of bytes: digits, with K, M, G or T (powers of 1024) after them."""
    number, unit = text[:-1], text[-1:].upper()
    if unit.isdigit():
        number, unit = text, ""
    if not number.isdigit() or unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"not a number of bytes: {text!r} (e.g. 500M, 2G)")
    return int(number) * _UNITS[unit]


class _DropImportNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return BEAM_IMPORT_NOISE not in record.getMessage()


def import_beam():
    """``apache_beam``, imported without its warning about Google Cloud's libraries."""
    noise = _DropImportNoise()
    root = logging.getLogger()
    root.addFilter(noise)
    try:
        import apache_beam
    finally:
        root.removeFilter(noise)
    return apache_beam


def unmatched_patterns(patterns: list[str]) -> tuple[list[str], int]:
    """(the patterns that match no file, the number of files the others match)."""
    from apache_beam.io.filesystems import FileSystems
    empty, found = [], 0
    for pattern, result in zip(patterns, FileSystems.match(patterns)):
        if result.metadata_list:
            found += len(result.metadata_list)
        else:
            empty.append(pattern)
    return empty, found


def run_report(out: str) -> tuple[str, int]:
    """The final line: traces, iterations, failed traces, where the outputs are (read back
    from the summaries written, so it holds on every runner); and the failed traces' count."""
    from apache_beam.io.filesystems import FileSystems
    traces = iterations = failed = 0
    for match in FileSystems.match([FileSystems.join(out, "summaries*.jsonl")]):
        for meta in match.metadata_list:
            with FileSystems.open(meta.path) as f:
                for line in f:
                    summary = json.loads(line)
                    traces += 1
                    iterations += summary.get("iterations") or 0
                    failed += summary.get("error") is not None
    line = (f"{traces} trace{'' if traces == 1 else 's'}, {iterations} iterations, "
            f"{failed} failed -> {out} ({', '.join(OUTPUT_NAMES)})")
    if failed:
        line += f"; why each failed: {FileSystems.join(out, 'dead_letters.jsonl')}"
    return line, failed


def remove_empty_scratch(out: str) -> None:
    """Remove ``OUTPUT/.ranges`` once every trace split in ranges has removed its files (a
    local output: an object store has no folders)."""
    scratch = os.path.join(out, RANGES_SCRATCH)
    if "://" not in out and os.path.isdir(scratch) and not os.listdir(scratch):
        os.rmdir(scratch)


def _to_json(value) -> str:
    from stream_split.write import event_json
    return event_json(value).decode("utf-8")


def build_pipeline(pipeline, args) -> None:
    """Add the archive-splitting steps for ``args`` to ``pipeline``."""
    import apache_beam as beam
    from apache_beam.io.filesystems import FileSystems

    from stream_split.beam import (
        SplitTraces, SummarizeGroups, iteration_parquet_schema, parquet_row)
    from stream_split.core import SplitOptions

    out = args.output
    template = None if args.sharded else ""

    def text(name):
        return beam.io.WriteToText(FileSystems.join(out, name), file_name_suffix=".jsonl",
                                   shard_name_template=template)

    options = SplitOptions(detector=args.detector, level=args.level)
    ranges = {} if args.split_large_over is None else {
        "split_large_over": args.split_large_over, "scratch_prefix": FileSystems.join(
            out, RANGES_SCRATCH), **({} if args.range_bytes is None else {
                "range_bytes": args.range_bytes})}
    split = (
        pipeline
        | "Patterns" >> beam.Create(args.input)
        | "SplitTraces" >> SplitTraces(
            options, pieces_prefix=FileSystems.join(out, "pieces") if args.pieces else None,
            **ranges))

    split.iterations | "IterationsJson" >> beam.Map(_to_json) | "WriteIterations" >> text(
        "iterations")
    schema = iteration_parquet_schema()
    (split.iterations
     | "ParquetRows" >> beam.Map(parquet_row, tuple(schema.names))
     | "WriteParquet" >> beam.io.WriteToParquet(
         FileSystems.join(out, "iterations"), schema, file_name_suffix=".parquet",
         shard_name_template=template))
    split.summaries | "SummariesJson" >> beam.Map(_to_json) | "WriteSummaries" >> text(
        "summaries")
    split.dead_letters | "DeadLettersJson" >> beam.Map(_to_json) | "WriteDeadLetters" >> text(
        "dead_letters")
    (split.summaries
     | "Groups" >> SummarizeGroups()
     | "GroupsJson" >> beam.Map(_to_json)
     | "WriteGroups" >> text("groups"))


def _runner(options):
    """The runner to use instead of the one named in the options, or None for that one.

    Beam's own DaskRunner cannot run this pipeline (it writes only the last output and mixes
    the transform's outputs); ``stream_split.dask_runner.DaskRunner`` is that runner fixed.
    """
    from apache_beam.options.pipeline_options import StandardOptions
    name = options.view_as(StandardOptions).runner or ""
    if not name.endswith("DaskRunner"):
        return None
    from stream_split.dask_runner import runner_for
    return runner_for(name)


def main(argv=None) -> int:
    args, pipeline_args = build_parser().parse_known_args(argv)
    beam = import_beam()
    from apache_beam.options.pipeline_options import PipelineOptions

    if not args.verbose:
        logging.getLogger().setLevel(logging.WARNING)
        if not any(a.startswith("--default_sdk_harness_log_level") for a in pipeline_args):
            pipeline_args.append("--default_sdk_harness_log_level=WARNING")
    empty, found = unmatched_patterns(args.input)
    for pattern in empty:
        print(f"split_archive: warning: no file matches --input {pattern}", file=sys.stderr)
    if not found:
        print("split_archive: error: the input matches no file; nothing to split",
              file=sys.stderr)
        return EXIT_NO_INPUT
    options = PipelineOptions(pipeline_args)
    with beam.Pipeline(runner=_runner(options), options=options) as pipeline:
        build_pipeline(pipeline, args)
    remove_empty_scratch(args.output)
    line, failed = run_report(args.output)
    print(line)
    return EXIT_DEAD_LETTERS if failed and args.fail_on_dead_letters else 0


if __name__ == "__main__":
    sys.exit(main())
