"""The ``stream-split`` command: a thin adapter from argv, files and pipes to ``run.drive``.

Commands: ``split`` (pieces + manifest + the per-iteration table; several traces: one folder
per rank and ``ranks.json``, see ``stream_split.ranks``), ``boundaries`` (records as they
become known), ``tag`` (every event back out with its iteration), ``explain`` (how the
iteration was found), ``summary`` (the table of a split or a trace; of a split of several
ranks, iteration k across the ranks too), ``plot`` (a picture of it). Progress goes to stderr
when it is a terminal. An option that could not do what it asked (``options``) is an error or
a warning, never silence. Bad input, a bad path or a bad option value ends with one line on
stderr and exit status 2,
never a traceback; whatever was decided before an input error is written first. SIGINT,
SIGTERM, SIGHUP and SIGUSR1 (``run.STOP_SIGNALS``) stop the run between two batches (outputs
stay whole, the manifest says incomplete) and exit 128 + the signal's number (130, 143...). A reader of stdout that goes away (``| head``) ends the command quietly,
exit status 0; a stdout or stdin that was never open (``>&-``, ``<&-`` with ``-``) is an
error line, exit status 2.

A command pays at start-up for what it uses: imported at the top is what every command that
reads a trace needs (the core, the reader, the run, the record streams of ``boundaries`` and
``tag``); what only some commands use (the split into a folder and its selection of
iterations, the manifest's entries, the table, the ranks, the plot) is reached as
``stream_split.<module>`` where it is used, and loaded then (README "House rules"). A command's
parser is given its arguments only when that command is parsed (``_Parser``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import stream_split
from stream_split import __version__
from stream_split.allocator import keep_freed_memory
from stream_split.core import SplitOptions
from stream_split.core.engine import DEFAULT_PENDING_LIMIT
from stream_split.core.serving import PHASES as SELECTABLE_PHASES
from stream_split.decode import DECODER_PASSES, MAX_EVENT_BYTES
from stream_split.errors import (
    OptionError, OptionHadNoEffect, OptionWarning, OutputError, RanksError, ReadInterrupted,
    WriteInterrupted,
    StreamSplitError)
from stream_split.follow import DEFAULT_IDLE_TIMEOUT
from stream_split.run import StopRequest, new_splitter, read_through, settle_imports
from stream_split.serialize import strict_json
from stream_split.write import LAYOUTS, NAME_BY, build_manifest, record_sink, tag_parts

EXIT_BAD_INPUT = 2
#: Rows of the table printed at the end of ``split`` (first, last, outliers); ``summary``
#: prints them all.
SPLIT_TABLE_ROWS = 40
#: Exit status after a signal stopped the run: the shell's convention, 128 + its number.
EXIT_SIGNAL_BASE = 128
#: The width given to the help formatters that argparse makes as arguments and commands are
#: added (``_Parser``): any, as they lay out no line it could wrap.
CHECK_WIDTH = 80


def sample_trace_path() -> str:
    """The small Kineto-shaped trace shipped inside the package (made by our generator)."""
    return os.path.join(os.path.dirname(__file__), "data", "sample_trace.json.gz")


def _selection(text: str):
    try:
        return stream_split.selection.parse_selection(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _steps(text: str):
    try:
        return stream_split.selection.parse_steps(text)
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
    """argparse with the CLI's error convention: one line on stderr, exit status 2. A
    command's parser is given its arguments (``arguments``, a function of the parser) the
    first time it parses or prints its help: a run builds its own command's arguments, not
    the seven others' (their help texts and types are never read).

    argparse checks each argument added with a help formatter of its own, and formats the
    commands' prefix (``stream-split``) with another, each of which reads the terminal's
    width, importing shutil (and bz2, lzma) for it: 1.8 ms, 6 M instructions of a
    ``boundaries`` run of a two-event trace. Neither lays out a line that a width could wrap
    (no arguments precede the command), so those formatters are given one (``_unwrapped``);
    help and usage read the terminal's as before."""

    #: True while an argument or the commands are added: a formatter asked for then lays
    #: nothing out.
    _checking = False

    def __init__(self, *args, arguments=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._arguments = arguments

    def add_argument(self, *args, **kwargs):
        return self._unwrapped(super().add_argument, *args, **kwargs)

    def add_subparsers(self, **kwargs):
        return self._unwrapped(super().add_subparsers, **kwargs)

    def _unwrapped(self, add, *args, **kwargs):
        """``add(*args, **kwargs)``, the formatters it asks for given ``CHECK_WIDTH``."""
        self._checking = True
        try:
            return add(*args, **kwargs)
        finally:
            self._checking = False

    def _get_formatter(self):
        if self._checking:
            return self.formatter_class(prog=self.prog, width=CHECK_WIDTH)
        return super()._get_formatter()

    def _complete(self) -> None:
        if self._arguments is not None:
            add, self._arguments = self._arguments, None
            add(self)

    def parse_known_args(self, args=None, namespace=None):
        self._complete()
        return super().parse_known_args(args, namespace)

    def format_usage(self):
        self._complete()
        return super().format_usage()

    def format_help(self):
        self._complete()
        return super().format_help()

    def error(self, message):
        self.exit(EXIT_BAD_INPUT, f"stream-split: error: {message}\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``stream-split`` parser: each command's arguments are added when that command is
    parsed (``_Parser``). ``command``: the command line's first word, a command: only its
    parser is made, as nothing else can be parsed or shown then (what follows the command
    is its parser's; this parser's errors show no usage). Making the seven others' (argparse's
    help action and groups, each with its translated titles) cost 10 M instructions, 2 % of a
    ``boundaries`` run of a two-event trace. Else (``--help``, ``--version``, a mistyped
    command) every command's parser is made."""
    parser = _Parser(
        prog="stream-split",
        description="Split a PyTorch profiler / Kineto trace into iterations, as a stream.")
    parser.add_argument("--version", action="version",
                        version=f"stream-split {__version__} (decoder: {DECODER_PASSES})")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (help_text, arguments) in COMMAND_ARGUMENTS.items():
        if command in (None, name):
            sub.add_parser(name, help=help_text, arguments=arguments)
    return parser


def _boundaries_arguments(p) -> None:
    _add_common(p)
    p.add_argument("--format", choices=("jsonl", "protobuf"), default="jsonl")


def _explain_arguments(p) -> None:
    _add_common(p)
    p.add_argument("--json", action="store_true", help="print the evidence as JSON")


def _summary_arguments(p) -> None:
    _add_common(p)
    p.add_argument("--json", action="store_true", help="print the table as one JSON document")


def _why_arguments(p) -> None:
    p.add_argument("trace", metavar="OUT_DIR", help="a folder written by stream-split split")
    p.add_argument("index", metavar="N", type=int, help="the iteration's index (#)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")


def _diff_arguments(p) -> None:
    p.add_argument("trace", metavar="OUT_DIR", help="a folder written by stream-split split")
    p.add_argument("index", metavar="A", type=int, help="the iteration to explain (#)")
    p.add_argument("baseline", metavar="B", type=int, help="the iteration to compare with (#)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")


def _plot_arguments(p) -> None:
    p.add_argument("trace", metavar="OUT_DIR", help="a folder written by stream-split split")
    p.add_argument("-o", "--output", required=True,
                   help="picture to write: .png (or .svg, .pdf), or .html")


def _add_common(p, several: bool = False) -> None:
    """The arguments every command that reads a trace takes."""
    if several:
        p.add_argument("trace", nargs="*",
                       help="trace file (.json, .json.gz, .zst, JSON Lines) or - for stdin; "
                            "several traces, or a folder of them, are the ranks of one "
                            "job: OUT/rank_<r>/ each, and OUT/ranks.json")
    else:
        p.add_argument("trace",
                       help="trace file (.json, .json.gz, .zst, JSON Lines) or - for stdin")
    p.add_argument("--detector", choices=("auto", "structure", "steps"), default="auto",
                   help="auto: structure with annotations as evidence (default); "
                        "structure: ignore annotations; steps: ProfilerStep#N only")
    p.add_argument("--level", type=_bounded_int(0), default=None,
                   help="split at the unit that repeats inside each iteration (layers, "
                        "micro-batches), N levels down, where there is one: else a warning "
                        "says what was found (explain shows the levels)")
    p.add_argument("--follow", action="store_true",
                   help="keep reading a file that is still being written")
    p.add_argument("--idle-timeout", type=_seconds, default=None,
                   help="stop after this many seconds without new bytes, the input marked "
                        f"incomplete: with --follow (default {DEFAULT_IDLE_TIMEOUT:g}), "
                        "or on a pipe or FIFO (default: wait for its writer to close it)")
    p.add_argument("--pending-limit", type=_bounded_int(1), default=DEFAULT_PENDING_LIMIT,
                   help="undecided events kept in memory before spilling to a temp file")
    p.add_argument("--max-event-bytes", type=_bounded_int(1), default=MAX_EVENT_BYTES,
                   help="longest event (and header) read, in bytes; a longer one is an "
                        "error (default 64 MiB: what the reader may hold at once)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress on stderr (it shows only on a terminal anyway)")


def _split_arguments(p) -> None:
    _add_common(p, several=True)
    p.add_argument("--sample", action="store_true",
                   help="split the small sample trace shipped with the package (no TRACE)")
    p.add_argument("-o", "--output", default="stream-split-out",
                   help="output folder (made whole at the end; must be new or empty)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an earlier output of stream-split (a folder holding "
                        "anything else, or the input, is refused)")
    p.add_argument("--iterations", type=_selection, default=None,
                   help="write only these iterations, e.g. '0,3,10-19', or 'steady' (the "
                        "steady state); all are counted")
    p.add_argument("--steps", type=_steps, default=None,
                   help="write only the iterations of these ProfilerStep numbers, e.g. "
                        "'15-17' (with --iterations: those both choose)")
    p.add_argument("--phase", choices=SELECTABLE_PHASES, default=None,
                   help="write only the iterations of this serving phase (a server's loop; "
                        "a trace without phases is an error)")
    p.add_argument("--steady", type=_bounded_int(1), default=None, metavar="N",
                   help="write only N representative iterations: of the steady state, not "
                        "outliers, the N nearest the median (per phase for a server)")
    p.add_argument("--name-by", choices=NAME_BY, default="index",
                   help="name pieces by iteration index (iteration_00003) or by ProfilerStep "
                        "number where there is one (step_00015); idle cycles are idle_NNNNN")
    p.add_argument("--plot", action="store_true",
                   help="also draw OUTPUT/iterations.png (needs the [plot] extra)")
    p.add_argument("--layout", choices=LAYOUTS, default="flat",
                   help="flat: pieces beside the manifest; hta: OUTPUT/iteration_<k>/"
                        "rank<r>.json.gz, every rank's piece of iteration k in one folder "
                        "(HTA's TraceAnalysis(trace_dir=...)), with a rank and a ProfilerStep "
                        "added where the trace has none")
    p.add_argument("--merge-ranks", action="store_true",
                   help="several ranks: also write OUTPUT/merged/iteration_<k>.json.gz, "
                        "iteration k of every rank in one trace (a process per rank) for "
                        "Perfetto")
    p.add_argument("--plain-json", action="store_true", help="write .json instead of .json.gz")
    p.add_argument("--compresslevel", type=_bounded_int(0, 9), default=1,
                   help="gzip level of the pieces (0-9)")
    p.add_argument("--workers", type=_bounded_int(1, None), default=None,
                   help="processes that split one large trace file (default 1; the output is "
                        "the same with any N); a pipe, --follow and small files are read as "
                        "one stream")


#: Each command: its help line in ``stream-split --help``, and what adds its arguments.
COMMAND_ARGUMENTS = {
    "split": ("write one Chrome trace per iteration and a manifest", _split_arguments),
    "boundaries": ("print boundary and iteration records as they are known",
                   _boundaries_arguments),
    "tag": ("write every event back out as a JSON line with its iteration", _add_common),
    "explain": ("say which repeating unit was chosen, and why", _explain_arguments),
    "summary": ("the per-iteration table of a split folder or a trace (several ranks: also "
                "iteration k across the ranks)", _summary_arguments),
    "why": ("what makes iteration N of a split folder differ from the steady state's median "
            "iteration", _why_arguments),
    "diff": ("iteration A of a split folder against iteration B", _diff_arguments),
    "plot": ("draw iteration time and GPU busy time per iteration", _plot_arguments)}


def _options(args, keep_events: bool) -> SplitOptions:
    return SplitOptions(detector=args.detector, level=args.level, keep_events=keep_events,
                        pending_limit=args.pending_limit)


def progress_wanted(quiet: bool, stream=None) -> bool:
    """Progress is shown only on a terminal, and never with ``--quiet``."""
    stream = stream if stream is not None else sys.stderr
    try:
        return not quiet and stream.isatty()
    except (AttributeError, ValueError):
        return False


def _reading(args) -> dict:
    """How a command reads its trace (``run.read_through``'s keywords)."""
    idle = args.idle_timeout
    if args.follow:
        follow, idle = DEFAULT_IDLE_TIMEOUT if idle is None else idle, None
    else:
        follow = None
    return {"stop": args.stop, "follow": follow, "idle_timeout": idle,
            "progress": progress_wanted(args.quiet), "on_warning": _print_warning}


def _print_warning(warning: OptionWarning) -> None:
    print(f"stream-split: warning: {warning.cli_message}", file=sys.stderr)


def _run(args, splitter, **sinks):
    """Read the trace through ``splitter`` (``run.read_through``, the options that could
    have done nothing checked): (error or None, reader info)."""
    outcome = read_through(args.trace, splitter, check=True, **_reading(args),
                           max_event_bytes=args.max_event_bytes, **sinks)
    return outcome.error, outcome.reader_info


def _choice(args):
    """What ``--iterations`` and ``--steps`` chose (``selection.IterationChoice``)."""
    return stream_split.selection.IterationChoice(
        args.iterations, args.iterations_text, args.steps, args.steps_text, args.phase,
        args.steady)


def _config(args, table_rows: int | None = None):
    """``split``'s arguments as the configuration of ``folder.split_to_folder`` (``table_rows``:
    ``SplitConfig.table_rows``)."""
    return stream_split.config.SplitConfig(
        options=_options(args, keep_events=True), overwrite=args.overwrite,
        choice=_choice(args), name_by=args.name_by,
        compress=not args.plain_json, compresslevel=args.compresslevel,
        plot=args.plot, layout=args.layout,
        max_event_bytes=args.max_event_bytes, workers=args.workers,
        table_rows=table_rows)


def cmd_split(args) -> int:
    if args.sample == bool(args.trace):
        raise OptionHadNoEffect("give a TRACE to split, or --sample for the sample trace "
                                "shipped with the package" if not args.sample else
                                "give a TRACE or --sample, not both")
    traces = [sample_trace_path()] if args.sample else args.trace
    if len(traces) > 1 or os.path.isdir(traces[0]):
        return cmd_split_ranks(args, traces)
    if args.merge_ranks:
        raise OptionHadNoEffect("--merge-ranks merges the ranks of one job: give two traces "
                                "or more (or a folder of them)")
    args.trace = traces[0]
    result = stream_split.folder.split_to_folder(  # the table made as the manifest is written
        args.trace, args.output, _config(args, None if args.quiet else SPLIT_TABLE_ROWS),
        **_reading(args))
    manifest, error, info = result.manifest, result.error, result.reader_info
    table = result.table
    if table is not None:
        stream_split.summary.render_text(table, sys.stdout, limit=SPLIT_TABLE_ROWS)
        kinds = table["rows"].kinds  # counted as the rows were made: the entries are read once
    else:
        kinds = stream_split.manifest_entries.kind_counts(manifest["iterations"])
    plural = stream_split.explain.plural
    summary = ", ".join(plural(n, "idle cycle" if k == "idle" else k)
                        for k, n in kinds.items()) or "0 iterations"
    counts = manifest["counts"]
    invalid, not_written = counts["invalid"], counts.get("events_not_written")
    print(f"{summary}; {counts['events_out']} events "
          f"({manifest['outside']['events']} outside"
          + (f", {invalid} invalid" if invalid else "")
          + (f", {not_written} in iterations not written" if not_written is not None else "")
          + f") -> {os.path.join(args.output, 'manifest.json')}"
          + ("" if manifest["complete"] else "  [input incomplete]"))
    return _finish(error, info)


def cmd_split_ranks(args, paths: list[str]) -> int:
    """Several traces (or a folder of them): the ranks of one job, split in parallel."""
    if args.follow or "-" in paths:
        print("stream-split: error: several ranks are read from files: no --follow, no stdin",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.plot:
        raise OptionHadNoEffect("--plot draws the split of one trace: run `stream-split plot "
                                "OUT/rank_<r> -o picture.png` for a rank")
    ranks = stream_split.ranks
    with stream_split.output.OutputFolder(args.output, overwrite=args.overwrite,
                                          inputs=paths) as folder:
        data = ranks.split_ranks(ranks.expand_traces(paths), folder.staging, _config(args),
                                 stop=args.stop)
        unread = [rank for rank in data["ranks"] if rank["error"] and not rank["iterations"]]
        if len(unread) == len(data["ranks"]):  # no trace among them: nothing to keep
            raise RanksError(f"no trace could be read: {unread[0]['trace']}: "
                             f"{unread[0]['error']}")
        merged = (stream_split.merge.merge_ranks(folder.staging, data,
                                                 ranks.rank_pieces(folder.staging, data),
                              compress=not args.plain_json) if args.merge_ranks else [])
        folder.commit()
    print(f"{len(data['ranks'])} ranks, {len(data['iterations'])} iterations aligned by "
          f"{data['aligned_by']}, {data['stragglers']} with a straggler"
          + ("" if data["counts_agree"] else " (iteration counts differ)")
          + f" -> {os.path.join(args.output, ranks.RANKS_FILE)}")
    if merged:
        print(f"{len(merged)} iterations of every rank merged -> "
              f"{os.path.join(args.output, stream_split.merge.MERGED_FOLDER)}/ "
              "(one process per rank)")
    failed = [r for r in data["ranks"] if r["error"]]
    for rank in failed:
        print(f"stream-split: error: rank {rank['rank']}: {rank['error']}", file=sys.stderr)
    return EXIT_BAD_INPUT if failed else 0


def cmd_boundaries(args) -> int:
    sink = record_sink(args.format, sys.stdout.buffer, trace=args.trace)
    splitter = new_splitter(_options(args, keep_events=False))
    error, info = _run(args, splitter, on_records=sink.write_many)
    sink.close()
    return _finish(error, info)


def cmd_tag(args) -> int:
    out = sys.stdout.buffer

    def emit(pairs):
        out.writelines(tag_parts(pairs))
        out.flush()
    splitter = new_splitter(_options(args, keep_events=True))
    error, info = _run(args, splitter, on_pairs=emit)
    return _finish(error, info)


def cmd_explain(args) -> int:
    splitter = new_splitter(_options(args, keep_events=False))
    error, info = _run(args, splitter)
    if args.json:
        print(json.dumps(splitter.evidence, indent=1, default=str))
    else:
        print(stream_split.explain.render(splitter))
    return _finish(error, info)


def _manifest_of(out_dir: str) -> dict:
    return _from_folder(stream_split.summary.load_manifest, out_dir, "manifest")


def _from_folder(load, out_dir: str, what: str):
    """``load(out_dir)``: a stream-split file of a split folder, its errors as one line."""
    try:
        return load(out_dir)
    except OSError as e:
        raise OutputError(f"no stream-split {what} in {out_dir}: "
                          f"{e.strerror or e}") from None
    except ValueError as e:
        raise OutputError(str(e)) from None


def cmd_summary(args) -> int:
    """The table of a split folder (its manifest), or of a trace (split, no pieces); of the
    folder of a split of several ranks (``ranks.json``), iteration k across the ranks."""
    error, info = None, {"complete": True}
    ranks = (_from_folder(stream_split.ranks.load_ranks, args.trace, stream_split.ranks.RANKS_FILE)
             if os.path.isdir(args.trace) else None)
    if ranks is not None:
        if args.json:
            print(strict_json(ranks, indent=1))
        else:
            stream_split.ranks.render_ranks(ranks)
        return 0
    if os.path.isdir(args.trace):
        manifest = _manifest_of(args.trace)
    else:
        splitter = new_splitter(_options(args, keep_events=False))
        error, info = _run(args, splitter)
        manifest = build_manifest(source=args.trace, splitter=splitter, reader_info=info,
                                  files=None, error=error)
    summary = stream_split.summary
    table = summary.build_table(manifest)
    if args.json:
        summary.render_json(table, sys.stdout)
    else:
        summary.render_text(table, sys.stdout)
    return _finish(error, info)


def cmd_why(args) -> int:
    """``why OUT N`` and ``diff OUT A B``: one iteration against another, from the pieces."""
    manifest = _manifest_of(args.trace)
    try:
        result = stream_split.analysis.diff(args.trace, manifest, args.index,
                                            getattr(args, "baseline", None))
    except OSError as e:
        raise OutputError(f"cannot read a piece of {args.trace}: {e.strerror or e}") from None
    except ValueError as e:
        raise OptionError(str(e)) from None
    if args.json:
        print(strict_json(result, indent=1))
    else:
        print(stream_split.analysis.render_comparison(result))
    return 0


def cmd_plot(args) -> int:
    """``plot OUT -o PICTURE``: the folders on the way to ``PICTURE`` are made (once its
    suffix names a format)."""
    manifest = _manifest_of(args.trace)
    stream_split.plot.plot_format(args.output)
    try:
        os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
        stream_split.plot.write_plot(manifest, args.output)
    except OSError as e:  # a folder, a full device, a missing parent...
        raise OutputError(f"cannot write the picture {args.output}: {e.strerror or e}") from None
    print(f"-> {args.output}")
    return 0


def _finish(error: str | None, info: dict) -> int:
    if error:
        print(f"stream-split: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not info.get("complete", True):
        print(f"stream-split: warning: incomplete input: {info.get('stop_reason')}",
              file=sys.stderr)
    return 0


COMMANDS = {"split": cmd_split, "boundaries": cmd_boundaries, "tag": cmd_tag,
            "explain": cmd_explain, "summary": cmd_summary, "plot": cmd_plot,
            "why": cmd_why, "diff": cmd_why}


def main(argv=None) -> int:
    """Run the command of ``argv`` (default: ``sys.argv``) in this process; its exit status.
    SIGINT, SIGTERM, SIGHUP, SIGUSR1 stop it between two batches, leaving whole outputs; a
    second signal is only counted (raising from a handler could cut a write in half)."""
    stop = StopRequest().install()
    try:
        return _main(argv, stop)
    finally:
        if stop.requested:  # the exit status is decided: a later signal must not replace it
            stop.ignore_further()


def script() -> None:
    """The ``stream-split`` command (the console script, after ``launch.script``'s settings;
    ``python -m stream_split.cli``):
    ``main``, whose status is the process's exit status. Once ``main`` has decided it, the
    stop signals are ignored until the process is gone: Python puts back the default handlers
    as it shuts down, and a SIGTERM sent in that moment killed a run that had ended whole by
    the signal (status -15). A signal that came before was ``main``'s to see. The C allocator
    keeps the memory it frees for reuse in this process (``allocator``: fewer page faults);
    the garbage collector no longer walks what the imports made (``run.settle_imports``)."""
    keep_freed_memory()
    settle_imports()
    status = main()
    StopRequest.ignore_further()
    sys.exit(status)


def _main(argv, stop: StopRequest) -> int:
    if sys.stderr is None:  # started with 2>&-: errors have nowhere to go
        sys.stderr = open(os.devnull, "w", encoding="utf-8")
    if sys.stdout is None:  # started with >&-: every command writes there
        print("stream-split: error: stdout is closed: there is nowhere to write the output",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    argv = sys.argv[1:] if argv is None else list(argv)
    first = argv[0] if argv and argv[0] in COMMAND_ARGUMENTS else None
    args = build_parser(first).parse_args(argv)
    args.stop = stop
    args.iterations_text = _option_text(argv, "--iterations")
    args.steps_text = _option_text(argv, "--steps")
    try:
        status = COMMANDS[args.command](args)
        sys.stdout.flush()  # a full disk or a closed pipe shows here, not at exit
    except ReadInterrupted:  # `split` stopped before its input's first event: nothing written
        print("stream-split: interrupted before the input began: nothing written",
              file=sys.stderr)
        return EXIT_SIGNAL_BASE + stop.signal
    except WriteInterrupted as e:  # stopped while its pieces were assembled: nothing written
        print(f"stream-split: {e}", file=sys.stderr)
        return EXIT_SIGNAL_BASE + stop.signal
    except StreamSplitError as e:
        print(f"stream-split: error: {e.cli_message}", file=sys.stderr)
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


def _option_text(argv: list, option: str) -> str | None:
    """The text given to ``option`` on the command line (for messages), or None."""
    for i, arg in enumerate(argv):
        if arg == option and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(option + "="):
            return arg.split("=", 1)[1]
    return None


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the flush at exit cannot fail a second time."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    script()
