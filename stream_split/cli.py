"""The ``stream-split`` command: a thin adapter from argv, files and pipes to ``run.drive``.

Commands: ``split`` (pieces + manifest), ``boundaries`` (records as they become known),
``tag`` (every event back out with its iteration), ``explain`` (how the iteration was found).
Bad input, a bad path or a bad option value ends with one line on stderr and exit status 2,
never a traceback; whatever was decided before an input error is written first. SIGINT and
SIGTERM stop the run between two events (outputs stay whole) and exit 128 + the signal's
number (130, 143). A closed stdout (``| head``) ends quietly.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys

from stream_split import __version__
from stream_split.core import SplitOptions
from stream_split.core.engine import DEFAULT_PENDING_LIMIT
from stream_split.output import OutputError, OutputFolder
from stream_split.read import ReadInterrupted, TraceInputError, TraceReader
from stream_split.run import StopRequest, drive, new_splitter, reader_info
from stream_split.write import PieceWriter, finish_split, record_sink, tag_lines

EXIT_BAD_INPUT = 2
#: Exit status after a signal stopped the run: the shell's convention, 128 + its number.
EXIT_SIGNAL_BASE = 128


def sample_trace_path() -> str:
    """The small Kineto-shaped trace shipped inside the package (made by our generator)."""
    return os.path.join(os.path.dirname(__file__), "data", "sample_trace.json.gz")


def parse_selection(text: str | None):
    """'0,3,5-9' -> predicate on iteration indices; None -> all. ValueError if malformed."""
    if not text:
        return None
    chosen, ranges = set(), []
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            if "-" in part:
                lo, hi = part.split("-", 1)
                ranges.append((int(lo) if lo else 0, int(hi) if hi else float("inf")))
            else:
                chosen.add(int(part))
    except ValueError:
        raise ValueError(f"not a list of iterations like '0,3,10-19': {text!r}") from None
    return lambda i: i in chosen or any(lo <= i <= hi for lo, hi in ranges)


def _selection(text: str):
    try:
        return parse_selection(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _bounded_int(lo: int, hi: int | None = None):
    """An argparse type: an integer in [lo, hi]."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(
                f"{value} is out of range ({lo}..{hi if hi is not None else ''})")
        return value
    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's error convention: one line on stderr, exit status 2."""

    def error(self, message):
        self.exit(EXIT_BAD_INPUT, f"stream-split: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
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
        p.add_argument("--level", type=_bounded_int(0), default=None,
                       help="split at a lower level of the repeating structure (1, 2, ...)")
        p.add_argument("--follow", action="store_true",
                       help="keep reading a file that is still being written")
        p.add_argument("--idle-timeout", type=_seconds, default=10.0,
                       help="with --follow: stop after this many seconds without new bytes")
        p.add_argument("--pending-limit", type=_bounded_int(1), default=DEFAULT_PENDING_LIMIT,
                       help="undecided events kept in memory before spilling to a temp file")

    p = sub.add_parser("split", help="write one Chrome trace per iteration and a manifest")
    common(p, trace_default=sample_trace_path())
    p.add_argument("-o", "--output", default="stream-split-out",
                   help="output folder (made whole at the end; must be new or empty)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a non-empty output folder (its old files all go)")
    p.add_argument("--iterations", type=_selection, default=None,
                   help="write only these iterations, e.g. '0,3,10-19' (all are counted)")
    p.add_argument("--plain-json", action="store_true", help="write .json instead of .json.gz")
    p.add_argument("--compresslevel", type=_bounded_int(0, 9), default=1,
                   help="gzip level of the pieces (0-9)")

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
                        pending_limit=args.pending_limit)


def _open_reader(args) -> TraceReader:
    if args.follow:
        from stream_split.follow import FollowedFile
        followed = FollowedFile(args.trace, idle_timeout=args.idle_timeout)
        args.stop.watch(followed)
        return TraceReader(followed, name=args.trace)
    return TraceReader(args.trace, stop=args.stop)


def _run(args, splitter, **sinks):
    """Read the trace through ``splitter``: (error or None, reader info, the reader or None).
    An input that cannot be opened, or a stop before its first byte, still closes the
    splitter, so that a manifest can be written."""
    try:
        reader = _open_reader(args)
    except (TraceInputError, ReadInterrupted) as e:
        splitter.close()
        info = reader_info(None)
        # A stop before the first byte (a followed file ends "empty"): not an input error.
        if isinstance(e, ReadInterrupted) or args.stop.requested:
            return None, dict(info, stop_reason="interrupted before the end of the input"), None
        return str(e), info, None
    with reader:
        outcome = drive(reader, splitter, stop=args.stop, **sinks)
    return outcome.error, outcome.reader_info, reader


def cmd_split(args) -> int:
    with OutputFolder(args.output, overwrite=args.overwrite) as folder:
        writer = PieceWriter(folder.staging, compress=not args.plain_json,
                             compresslevel=args.compresslevel, select=args.iterations)
        splitter = new_splitter(_options(args, keep_events=True), spill_dir=folder.staging)
        error, info, reader = _run(args, splitter, on_pairs=writer.add_many)
        manifest = finish_split(writer, splitter, reader, source=args.trace, reader_info=info,
                                error=error)
        folder.commit()
    kinds = {}
    for it in manifest["iterations"]:
        kinds[it["kind"]] = kinds.get(it["kind"], 0) + 1
    summary = ", ".join(f"{n} {k}" + ("s" if n != 1 and k == "iteration" else "")
                        for k, n in kinds.items()) or "0 iterations"
    invalid = manifest["counts"]["invalid"]
    print(f"{summary}; {manifest['counts']['events_out']} events "
          f"({manifest['outside']['events']} outside"
          + (f", {invalid} invalid" if invalid else "")
          + f") -> {os.path.join(args.output, 'manifest.json')}"
          + ("" if manifest["complete"] else "  [input incomplete]"))
    return _finish(error, info)


def cmd_boundaries(args) -> int:
    sink = record_sink(args.format, sys.stdout.buffer, trace=args.trace)
    splitter = new_splitter(_options(args, keep_events=False))
    error, info, _ = _run(args, splitter, on_record=sink.write)
    sink.close()
    return _finish(error, info)


def cmd_tag(args) -> int:
    out = sys.stdout.buffer

    def emit(pairs):
        out.write(tag_lines(pairs))
        out.flush()
    splitter = new_splitter(_options(args, keep_events=True))
    error, info, _ = _run(args, splitter, on_pairs=emit)
    return _finish(error, info)


def cmd_explain(args) -> int:
    import json
    from stream_split.explain import render
    splitter = new_splitter(_options(args, keep_events=False))
    error, info, _ = _run(args, splitter)
    if args.json:
        print(json.dumps(splitter.evidence, indent=1, default=str))
    else:
        print(render(splitter))
    return _finish(error, info)


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
    # SIGINT/SIGTERM: stop between two events, leaving whole outputs; a second signal is only
    # counted (raising from a handler could cut a write in half).
    stop = StopRequest()
    signal.signal(signal.SIGTERM, stop.request)
    signal.signal(signal.SIGINT, stop.request)
    args = build_parser().parse_args(argv)
    args.stop = stop
    try:
        status = COMMANDS[args.command](args)
        sys.stdout.flush()  # a full disk or a closed pipe shows here, not at exit
    except (TraceInputError, OutputError) as e:
        print(f"stream-split: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining
        # about the closed stdout at exit.
        _silence_stdout()
        return 0
    except OSError as e:  # the output: a full disk, a read-only file system, /dev/full...
        _silence_stdout()
        where = f": {e.filename}" if e.filename else ""
        print(f"stream-split: error: cannot write the output: {e.strerror or e}{where}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    if stop.requested and status == 0:
        return EXIT_SIGNAL_BASE + stop.signal
    return status


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the flush at exit cannot fail a second time."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
