"""What a command pays before it reads a byte: each loads only what it uses (README "House
rules": the package's one late import). rich only where something is drawn, protobuf only for
``--format protobuf``, the plot, the parallel split and the ranks only for their options;
``import stream_split`` loads nothing, and its public names still come from it."""
from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys

import pytest

from stream_split import cli
from stream_split.core.engine import DEFAULT_PENDING_LIMIT

#: Loaded by no command below unless it asks for them.
OPTIONAL = ("rich", "google.protobuf", "matplotlib", "concurrent.futures", "stream_split.progress",
            "stream_split.schema", "stream_split.plot", "stream_split.picture",
            "stream_split.parallel", "stream_split.ranks", "stream_split.merge",
            "stream_split.watch", "stream_split.output", "hashlib", "stream_split.selection",
            "stream_split.manifest_entries", "stream_split.analysis")
#: What writes files (``output``: files created new, and hashlib), chooses the iterations to
#: write (``selection``) and makes a manifest (its entries, the outliers' explanations):
#: ``split`` only.
WRITING = {"stream_split.output", "hashlib", "stream_split.selection",
           "stream_split.manifest_entries", "stream_split.analysis"}

#: Standard modules imported only where they are needed (``test_house``'s
#: ``LATE_STANDARD_IMPORTS``: the pieces of ``split``, a run that spills), and hashlib (OpenSSL),
#: which only ``output`` imports: a command that writes no pieces loads none of them.
LATE_STANDARD = ("tempfile", "shutil", "queue", "threading", "hashlib")

_RUN = """
import json, sys
from stream_split.cli import main
status = main(sys.argv[2:])
loaded = sorted(m for m in sys.modules if m.split('.')[0] in (
    'rich', 'google', 'matplotlib', 'concurrent', 'stream_split', 'tempfile', 'shutil', 'queue',
    'threading', 'hashlib'))
print(json.dumps([status, loaded]), file=open(sys.argv[1], 'w'))
"""


def _loaded(tmp_path, *argv) -> set[str]:
    """The modules loaded by ``stream-split ARGV`` in a fresh process (stdout thrown away)."""
    report = tmp_path / "loaded.json"
    subprocess.run([sys.executable, "-c", _RUN, str(report), *argv], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    status, loaded = json.loads(report.read_text())
    assert status == 0
    return set(loaded)


def _prefixes(loaded: set[str]) -> set[str]:
    """Each module of ``OPTIONAL`` that is loaded (``rich`` for any ``rich.*``)."""
    return {name for name in OPTIONAL
            if any(m == name or m.startswith(name + ".") for m in loaded)}


@pytest.mark.parametrize("argv, wanted", [
    (("boundaries",), set()), (("tag",), set()), (("explain",), set()),
    (("split", "--quiet", "-o", "{out}"), WRITING)])
def test_a_command_loads_only_what_it_uses(small_trace, tmp_path, argv, wanted):
    argv = [a.format(out=tmp_path / "out") for a in argv]
    loaded = _loaded(tmp_path, argv[0], str(small_trace), *argv[1:])
    assert _prefixes(loaded) == wanted


@pytest.mark.parametrize("command", ["boundaries", "tag", "explain"])
def test_a_command_that_writes_no_pieces_loads_no_late_standard_module(small_trace, tmp_path,
                                                                       command):
    """Nor does its parser: argparse's formatters read the terminal's width (shutil) only for
    help (``cli._Parser``)."""
    assert not _loaded(tmp_path, command, str(small_trace)) & set(LATE_STANDARD)


def test_what_an_option_asks_for_is_loaded_when_asked(small_trace, tmp_path):
    assert "google.protobuf" in _prefixes(_loaded(
        tmp_path, "boundaries", str(small_trace), "--format", "protobuf"))
    table = _prefixes(_loaded(tmp_path, "split", str(small_trace), "-o", str(tmp_path / "o")))
    assert "rich" in table and "stream_split.plot" not in table


def _command_parsers(parser) -> dict:
    """The parser of each command of ``parser`` (``stream-split``'s), by name."""
    return next(a for a in parser._actions
                if isinstance(a, argparse._SubParsersAction)).choices


def _options_of(parser) -> set[str]:
    return {o for action in parser._actions for o in action.option_strings}


def test_a_command_s_arguments_are_built_when_it_is_parsed_and_only_its_own():
    """``cli._Parser``: a run builds its own command's arguments, not the others'; a command's
    help (or usage in an error) shows them all the same."""
    parser = cli.build_parser()
    commands = _command_parsers(parser)
    assert list(commands) == list(cli.COMMAND_ARGUMENTS)
    assert all(_options_of(p) == {"-h", "--help"} for p in commands.values())
    args = parser.parse_args(["boundaries", "t.json", "--format", "protobuf", "--level", "1"])
    assert (args.trace, args.format, args.level, args.pending_limit) == (
        "t.json", "protobuf", 1, DEFAULT_PENDING_LIMIT)
    built = {name for name, p in commands.items() if _options_of(p) != {"-h", "--help"}}
    assert built == {"boundaries"}
    assert "--workers" in commands["split"].format_help()  # built for its help
    assert "--iterations ITERATIONS" in commands["split"].format_usage()
    assert commands["why"].parse_args(["out", "3"]).index == 3


def test_a_command_line_that_begins_with_its_command_makes_only_that_command_s_parser(capsys):
    """``cli.build_parser(command)``: the other commands' parsers are not made; what follows
    the command is its parser's (its help too); the error convention is the same."""
    parser = cli.build_parser("boundaries")
    assert list(_command_parsers(parser)) == ["boundaries"]
    assert parser.parse_args(["boundaries", "t.json"]).trace == "t.json"
    with pytest.raises(SystemExit):
        cli.build_parser("split").parse_args(["split", "--help"])
    assert "--workers" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exited:
        cli.build_parser("tag").parse_args(["tag", "t.json", "--bogus"])
    assert exited.value.code == cli.EXIT_BAD_INPUT
    assert capsys.readouterr().err == "stream-split: error: unrecognized arguments: --bogus\n"


def test_every_command_is_listed_with_its_help_line(capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["--help"])
    listed = " ".join(capsys.readouterr().out.split())
    for name, (help_line, _) in cli.COMMAND_ARGUMENTS.items():
        assert f"{name} {help_line}" in listed


def test_import_stream_split_loads_nothing_and_keeps_its_public_names():
    code = ("import sys, stream_split\n"
            "print(sorted(m for m in sys.modules if m.startswith(('stream_split.', 'numpy'))))\n"
            "from stream_split import *\n"
            "print(sorted(n for n in stream_split.__all__ if n not in globals()))\n"
            "print(stream_split.split.__module__, stream_split.iterations.__module__)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, timeout=120).stdout.splitlines()
    assert out == ["[]", "[]", "stream_split.library stream_split.library"]


_ALLOCATOR = """
import json
from stream_split.allocator import keep_freed_memory
print(json.dumps(keep_freed_memory()))
"""


_GIVE_BACK = """
import json
from stream_split import allocator


def anon_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssAnon"))


allocator.keep_freed_memory()
blocks = [bytearray(256 << 10) for _ in range(200)]  # 50 MB of the heap, touched
del blocks  # kept: the heap is trimmed only beyond 128 MB
kept = anon_kb()
allocator.give_back_free_pages(allocator.GIVE_BACK_EVERY - 1)  # not yet
later = anon_kb()
allocator.give_back_free_pages(allocator.GIVE_BACK_EVERY)
print(json.dumps([kept - later, kept - anon_kb()]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_a_cli_run_gives_the_kept_free_pages_back_every_so_many_batches():
    """What ``keep_freed_memory`` keeps is given back by ``give_back_free_pages`` every
    ``GIVE_BACK_EVERY`` batches (the heap grows otherwise: see ``allocator``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", _GIVE_BACK], capture_output=True, text=True,
                         env=env, check=True).stdout
    not_yet, given_back = json.loads(out)
    assert not_yet < 5_000 and given_back > 40_000  # KB


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_cli_allocator_keeps_freed_memory_unless_the_user_set_a_limit():
    """``allocator.keep_freed_memory`` (called by the console script only: it changes the
    whole process) takes both limits on glibc, and leaves them to a user who set one."""
    def run(env):
        out = subprocess.run([sys.executable, "-c", _ALLOCATOR], capture_output=True, text=True,
                             env=env, check=True).stdout
        return json.loads(out)
    plain = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    assert run(plain) is True
    assert run({**plain, "MALLOC_TRIM_THRESHOLD_": "1048576"}) is False


def test_the_console_script_asks_openblas_for_one_thread_before_numpy_loads(monkeypatch):
    """``stream-split`` (``launch.script``) sets ``OPENBLAS_NUM_THREADS=1`` before the CLI
    (and numpy) is imported, and keeps a value the user set; it imports the CLI with the
    garbage collector off; pyproject's console script is it."""
    import tomllib
    from pathlib import Path

    from stream_split import launch

    seen = []

    def script():  # the CLI's, loaded: it turns the collector back on (``run.settle_imports``)
        seen.append((os.environ.get("OPENBLAS_NUM_THREADS"), gc.isenabled()))
        gc.enable()
    monkeypatch.setattr(cli, "script", script)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    try:
        launch.script()
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
        launch.script()
    finally:
        gc.enable()
    assert seen == [("1", False), ("4", False)]
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["stream-split"] == "stream_split.launch:script"


_SETTLED = """
import atexit, gc, json, sys
seen = []  # the freeze count at each collection, "script" where the console script began
gc.callbacks.append(lambda phase, info: phase == "start" and seen.append(gc.get_freeze_count()))
report = open(sys.argv[1], "w")
atexit.register(lambda: print(json.dumps([gc.isenabled(), gc.get_freeze_count(), seen]),
                              file=report, flush=True))
from stream_split import launch
sys.argv = ["stream-split", *sys.argv[2:]]
seen.append("script")
launch.script()
"""


def test_the_console_script_imports_uncollected_then_keeps_the_imports_from_the_collector(
        small_trace, tmp_path):
    """``launch.script`` imports the CLI with the garbage collector off; then what the
    imports made is frozen (``run.settle_imports``), and the run has automatic collection."""
    report = tmp_path / "gc.json"
    subprocess.run([sys.executable, "-c", _SETTLED, str(report), "boundaries", str(small_trace)],
                   check=True, stdout=subprocess.DEVNULL, timeout=120)
    enabled, frozen, seen = json.loads(report.read_text())
    after = seen[seen.index("script") + 1:]
    assert enabled and frozen > 10_000  # numpy's objects and ours
    assert 0 not in after  # no collection walked the imports as they were made


def test_the_command_starts_numpy_without_a_blas_thread_pool(tmp_path):
    """Through the console script's settings, a run of the command has one thread where
    numpy's OpenBLAS would have started one per core (Linux: /proc lists the threads)."""
    if not os.path.isdir("/proc/self/task"):
        pytest.skip("no /proc: the threads cannot be counted here")
    count = ("import os, sys; from stream_split import launch; "
             "sys.argv[1] == 'set' and launch.set_process_environment(); import numpy; "
             "print(len(os.listdir('/proc/self/task')))")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}

    def threads(how: str) -> int:
        return int(subprocess.run([sys.executable, "-c", count, how], env=env, text=True,
                                  capture_output=True, check=True).stdout)

    assert threads("set") == 1
    if (os.cpu_count() or 1) > 1:  # else OpenBLAS starts no other thread anyway
        assert threads("unset") > 1
