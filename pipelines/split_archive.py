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

File names are exact (one shard each) unless ``--sharded``, which lets the runner choose the
number of shards and names them ``iterations-00000-of-00004.jsonl`` etc.: use it at scale,
where one writer per output would be the bottleneck.
"""
from __future__ import annotations

import argparse
import sys


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
    parser.add_argument("--sharded", action="store_true",
                        help="let the runner shard the outputs (NAME-SSSSS-of-NNNNN.EXT)")
    return parser


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
    split = (
        pipeline
        | "Patterns" >> beam.Create(args.input)
        | "SplitTraces" >> SplitTraces(
            options, pieces_prefix=FileSystems.join(out, "pieces") if args.pieces else None))

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
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    args, pipeline_args = build_parser().parse_known_args(argv)
    options = PipelineOptions(pipeline_args)
    with beam.Pipeline(runner=_runner(options), options=options) as pipeline:
        build_pipeline(pipeline, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
