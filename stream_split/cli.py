"""The ``stream-split`` command: a thin adapter from argv, files and pipes to ``run.drive``.

Commands: ``split`` (pieces + manifest), ``boundaries`` (records as they become known),
``tag`` (every event back out with its iteration), ``explain`` (how the iteration was found).
Bad input ends with one line on stderr and exit status 2, never a traceback; whatever was
decided before the error is written first. A closed stdout (``| head``) ends quietly.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys

from stream_split import __version__
from stream_split.core import SplitOptions
from stream_split.core.engine import DEFAULT_PENDING_LIMIT
from stream_split.core.records import METADATA, OUTSIDE
from stream_split.read import TraceInputError, TraceReader
from stream_split.run import StopRequest, drive, new_splitter
from stream_split.serialize import event_json
from stream_split.write import (
    PieceWriter, finish_split, piece_name, record_sink, OUTSIDE_NAME)

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


def sample_trace_path() -> str:
    """The small Kineto-shaped trace shipped inside the package (made by our generator)."""
    return os.path.join(os.path.dirname(__file__), "data", "sample_trace.json.gz")


def parse_selection(text: str | None):
    """'0,3,5-9' -> predicate on iteration indices; None -> all."""
    if not text:
        return None
    chosen, ranges = set(), []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            ranges.append((int(lo) if lo else 0, int(hi) if hi else float("inf")))
        else:
            chosen.add(int(part))
    return lambda i: i in chosen or any(lo <= i <= hi for lo, hi in ranges)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stream-split",
        description="Split a PyTorch profiler / Kineto trace into iterations, as a stream.")
    parser.add_argument("--version", action="version", version=f"stream-split {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p, trace_default=None):
        p.add_argument("trace", nargs="?" if trace_default else None, default=trace_default,
                       help="trace file (.json, .json.gz, .zst, JSON Lines) or - for stdin"
                       + (" (default: the sample trace shipped with the package)"
                          if trace_default else ""))
        p.add_argument("--detector", choices=("auto", "structure", "steps"), default="auto",
                       help="auto: structure with annotations as evidence (default); "
                            "structure: ignore annotations; steps: ProfilerStep#N only")
        p.add_argument("--level", type=int, default=None,
                       help="split at a lower level of the repeating structure (1, 2, ...)")
        p.add_argument("--follow", action="store_true",
                       help="keep reading a file that is still being written")
        p.add_argument("--idle-timeout", type=float, default=10.0,
                       help="with --follow: stop after this many seconds without new bytes")
        p.add_argument("--pending-limit", type=int, default=DEFAULT_PENDING_LIMIT,
                       help="undecided events kept in memory before spilling to a temp file")

    p = sub.add_parser("split", help="write one Chrome trace per iteration and a manifest")
    common(p, trace_default=sample_trace_path())
    p.add_argument("-o", "--output", default="stream-split-out", help="output directory")
    p.add_argument("--iterations", default=None,
                   help="write only these iterations, e.g. '0,3,10-19' (all are counted)")
    p.add_argument("--plain-json", action="store_true", help="write .json instead of .json.gz")
    p.add_argument("--compresslevel", type=int, default=1, help="gzip level of the pieces")

    p = sub.add_parser("boundaries", help="print boundary and iteration records as they are known")
    common(p)
    p.add_argument("--format", choices=("jsonl", "protobuf"), default="jsonl")

    p = sub.add_parser("tag", help="write every event back out as a JSON line with its iteration")
    common(p)

    p = sub.add_parser("explain", help="say which repeating unit was chosen, and why")
    common(p)
    p.add_argument("--json", action="store_true", help="print the evidence as JSON")
    return parser


def _options(args, keep_events: bool) -> SplitOptions:
    return SplitOptions(detector=args.detector, level=args.level, keep_events=keep_events,
                        pending_limit=args.pending_limit, hold_serialized=keep_events)


def _open_reader(args) -> TraceReader:
    if args.follow:
        from stream_split.follow import FollowedFile
        followed = FollowedFile(args.trace, idle_timeout=args.idle_timeout)
        args.stop.watch(followed)
        return TraceReader(followed, name=args.trace)
    return TraceReader(args.trace)


def cmd_split(args) -> int:
    os.makedirs(args.output, exist_ok=True)
    writer = PieceWriter(args.output, compress=not args.plain_json,
                         compresslevel=args.compresslevel,
                         select=parse_selection(args.iterations))
    splitter = new_splitter(_options(args, keep_events=True), spill_dir=args.output)
    reader = None
    try:
        reader = _open_reader(args)
        outcome = drive(reader, splitter, on_pairs=writer.add_many, stop=args.stop)
        error, info = outcome.error, outcome.reader_info
    except TraceInputError as e:  # nothing could be read at all
        splitter.close()
        error, info = str(e), {"complete": False, "stop_reason": None, "form": None}
    except KeyboardInterrupt:  # a signal before the first event: still leave a manifest
        splitter.close()
        error, info = None, {"complete": False, "form": None,
                             "stop_reason": "interrupted before the end of the input"}
    manifest = finish_split(writer, splitter, reader, source=args.trace, reader_info=info,
                            error=error)
    kinds = {}
    for it in manifest["iterations"]:
        kinds[it["kind"]] = kinds.get(it["kind"], 0) + 1
    summary = ", ".join(f"{n} {k}" + ("s" if n != 1 and k == "iteration" else "")
                        for k, n in kinds.items()) or "0 iterations"
    print(f"{summary}; {manifest['counts']['events_out']} events "
          f"({manifest['outside']['events']} outside) -> {os.path.join(args.output, 'manifest.json')}"
          + ("" if manifest["complete"] else "  [input incomplete]"))
    return _finish(error, info)


def cmd_boundaries(args) -> int:
    sink = record_sink(args.format, sys.stdout.buffer, trace=args.trace)
    splitter = new_splitter(_options(args, keep_events=False))
    reader = _open_reader(args)
    outcome = drive(reader, splitter, on_record=sink.write, stop=args.stop)
    sink.close()
    return _finish(outcome.error, outcome.reader_info)


def cmd_tag(args) -> int:
    out = sys.stdout.buffer
    def emit(pairs):
        lines = []
        for owner, event in pairs:
            if owner == METADATA:
                head = b'{"iteration":null,"piece":"metadata","event":'
            elif owner == OUTSIDE:
                head = b'{"iteration":null,"piece":"' + OUTSIDE_NAME.encode() + b'","event":'
            else:
                head = (b'{"iteration":' + str(owner).encode() + b',"piece":"'
                        + piece_name(owner).encode() + b'","event":')
            lines.append(head + event_json(event) + b"}\n")
        out.write(b"".join(lines))
        out.flush()
    splitter = new_splitter(_options(args, keep_events=True))
    reader = _open_reader(args)
    outcome = drive(reader, splitter, on_pairs=emit, batch=1 if args.follow else 256,
                    stop=args.stop)
    return _finish(outcome.error, outcome.reader_info)


def cmd_explain(args) -> int:
    import json
    from stream_split.explain import render
    splitter = new_splitter(_options(args, keep_events=False))
    reader = _open_reader(args)
    outcome = drive(reader, splitter, stop=args.stop)
    if args.json:
        print(json.dumps(splitter.evidence, indent=1, default=str))
    else:
        print(render(splitter))
    return _finish(outcome.error, outcome.reader_info)


def _finish(error: str | None, info: dict) -> int:
    if error:
        print(f"stream-split: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not info.get("complete", True):
        print(f"stream-split: warning: incomplete input: {info.get('stop_reason')}",
              file=sys.stderr)
    return 0


COMMANDS = {"split": cmd_split, "boundaries": cmd_boundaries, "tag": cmd_tag,
            "explain": cmd_explain}


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    # SIGINT/SIGTERM: finish cleanly between two events, leaving complete outputs.
    args.stop = StopRequest()
    signal.signal(signal.SIGTERM, args.stop.request)
    signal.signal(signal.SIGINT, args.stop.request)
    try:
        return COMMANDS[args.command](args)
    except TraceInputError as e:
        print(f"stream-split: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining
        # about the closed stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("stream-split: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
