"""Shared fixtures and helpers: the project's generated traces, the real traces in ../shared (if
any), runs of the real `stream-split` command and checks of the folders they write."""
from __future__ import annotations

import collections
import contextlib
import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import settings

import stream_split.decode as decode_module
from stream_split.cli import main as cli_main
from stream_split.output import FOLDER_MARKER, TEMP_PREFIX, lock_path, target_key
from stream_split.testing.generate import generate, render

# Property tests draw the same examples on every run ("repeatable"), so a run here and a CI
# run check the same cases and CI never fails on a draw nobody saw before. To look for new
# failures, run with HYPOTHESIS_PROFILE=explore (random draws, more of them); a case it finds
# becomes an @example of its test.
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("STREAM_SPLIT_SHARED", REPO.parent / "shared"))
SHARED_TRACES = SHARED / "traces"


def shared_trace_paths():
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(str(p) for p in SHARED_TRACES.rglob("*.json.gz"))


#: A real trace larger than this (as stored, compressed or not) makes its case slow: the 19
#: real traces and recordings of 0.3-4 MB take most of a run's time, the 22 smaller ones show
#: the same behaviours in seconds.
LARGE_TRACE_BYTES = 250_000


@contextlib.contextmanager
def decoder_passes(kind: str):
    """The decoder's hot passes are ``kind`` inside the block: "native" (``stream_split._native``
    where it is built) or "numpy" (numpy and msgspec, the fallback, as with
    ``STREAM_SPLIT_NO_NATIVE=1``)."""
    saved = decode_module._native
    if kind == "numpy":
        decode_module._native = None
    try:
        yield
    finally:
        decode_module._native = saved


def large_ones_slow(cases, path_of=Path) -> list:
    """``cases`` as test parameters, those whose trace (``path_of(case)``) is large marked
    ``slow`` (deselected by default, run by ``.ci/run``: see pyproject.toml)."""
    return [pytest.param(case, marks=pytest.mark.slow)
            if os.path.getsize(path_of(case)) > LARGE_TRACE_BYTES else case for case in cases]


def recorded_cases(names, not_yet: dict, path_of) -> list:
    """Recordings as test parameters: a strict xfail (with its measured reason) for each one in
    ``not_yet``, so that the day it passes the test fails and the list is corrected; the
    others through ``large_ones_slow``."""
    failing = [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=not_yet[name]))
               for name in names if name in not_yet]
    return failing + large_ones_slow([name for name in names if name not in not_yet], path_of)


def profiler_step_names(path) -> set:
    """The names of the ``ProfilerStep#N`` annotations of the recording at ``path``."""
    from stream_split.testing.accuracy import read_events
    return {e["name"] for e in read_events(path)
            if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")}


def split_keeps_every_event(trace, out_dir, *options) -> None:
    """A split of ``trace`` into ``out_dir`` writes each of its non-metadata events into
    exactly one piece (an iteration or the outside piece), as its manifest counts them."""
    from stream_split.testing.accuracy import read_events
    run_cli("split", trace, "-o", out_dir, *options)
    manifest = json.loads((Path(out_dir) / "manifest.json").read_text())
    assert manifest["counts"]["conserved"]
    written = sum(sum(1 for e in load_piece(Path(out_dir) / entry["file"])["traceEvents"]
                      if e.get("ph") != "M")
                  for entry in manifest["iterations"] + [manifest["outside"]])
    assert written == sum(1 for e in read_events(trace) if e.get("ph") != "M")


needs_shared = pytest.mark.skipif(not SHARED_TRACES.is_dir(),
                                  reason="../shared/traces is absent (a user's clone has none)")


def run_cli(*args, input_bytes=None, check=True, timeout=120, env_update=None):
    """Run the real `stream-split` entry point in a subprocess (its environment this one's,
    with ``env_update``)."""
    env = {**os.environ, **env_update} if env_update else None
    proc = subprocess.run([sys.executable, "-m", "stream_split.cli", *map(str, args)],
                          input=input_bytes, capture_output=True, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"stream-split {args} failed ({proc.returncode}): "
                             f"{proc.stderr.decode(errors='replace')}")
    return proc


def load_piece(path):
    import gzip
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        return json.load(f)


def owners_of(events, splitter_options=None, feed_order=None, header=None):
    """Run events through the core (after the header keys ``header``, as the CLI gives them);
    return owners parallel to ``events`` (None = metadata)."""
    from stream_split.core import Splitter, SplitOptions, METADATA
    splitter = Splitter(splitter_options or SplitOptions())
    splitter.note_header(header)
    index = {id(e): i for i, e in enumerate(events)}
    for e in (feed_order or events):
        splitter.feed(e)
    splitter.close()
    got = [0] * len(events)
    seen = 0
    for owner, e in splitter.pop_assigned():
        got[index[id(e)]] = None if owner == METADATA else owner
        seen += 1
    assert seen == len(events), "every event is assigned exactly once"
    return got, splitter


def assert_split_exactly(trace, options=None, with_header=False):
    """``trace`` (a ``GeneratedTrace``) split as its truth says: the same iterations (start and
    kind) and every event in its true piece. Returns the Splitter (its evidence, records).
    ``options`` default to the structure detector with annotations as evidence;
    ``with_header``: the trace's header keys come first, as the CLI reads them."""
    from stream_split.core import SplitOptions
    got, splitter = owners_of(trace.events, options or SplitOptions(detector="auto"),
                              header=trace.header_before if with_header else None)
    assert [(it.start_ts, it.kind) for it in splitter.iterations] == \
        [(it["start_ts"], it["kind"]) for it in trace.truth.iterations], splitter.evidence
    wrong = [(e.get("cat"), e.get("name"), o, t)
             for e, o, t in zip(trace.events, got, trace.truth.owners) if o != t]
    assert not wrong, f"{len(wrong)} events in the wrong piece, e.g. {wrong[:3]}"
    return splitter


def write_truncated_trace(path, seed=3) -> None:
    """A killed writer's trace: gzip stream and JSON both cut off two thirds of the way in."""
    import gzip
    from stream_split.testing import generate as g
    whole = gzip.compress(g.render(g.generate("training", seed=seed), "object", True).encode())
    Path(path).write_bytes(whole[: len(whole) * 2 // 3])


def write_corrupt_gzip_trace(path, seed=4) -> None:
    """A whole trace whose gzip trailer is damaged: the CRC-32 no longer matches the data."""
    import gzip
    from stream_split.testing import generate as g
    data = bytearray(gzip.compress(
        g.render(g.generate("training", seed=seed), "object", True).encode()))
    data[-8] ^= 0xFF
    Path(path).write_bytes(bytes(data))


def frames_away_from_their_step(events, found):
    """The phase at the outermost frame of the step, checked against ``ProfilerStep#N``: for
    each step, the outermost Python frame that begins inside the step and holds its first
    cpu_op (``training_step``); every Python frame inside that one (it included) must be in
    the piece of that op. ``found``: owners parallel to ``events``. Returns the frames that
    are not, as (name, ts, owner, owner of the step's first op)."""
    steps = sorted((e["ts"], e["ts"] + e["dur"], e["tid"]) for e in events
                   if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                   and str(e.get("name", "")).startswith("ProfilerStep#"))
    ops = sorted((e["ts"], e.get("dur") or 0, e["tid"], o) for e, o in zip(events, found)
                 if e.get("cat") == "cpu_op")
    frames = [(e, o) for e, o in zip(events, found) if e.get("cat") == "python_function"]
    away = []
    for lo, hi, tid in steps:
        first = next((op for op in ops if op[2] == tid and lo <= op[0] < hi), None)
        if first is None:
            continue
        ts, dur, _, owner = first
        openers = [e for e, _ in frames if e["tid"] == tid and lo <= e["ts"] <= ts
                   and e["ts"] + e["dur"] >= ts + dur]
        if not openers:
            continue
        top = min(openers, key=lambda e: e["ts"])
        a, b = top["ts"], top["ts"] + top["dur"]
        away += [(e["name"], e["ts"], o, owner) for e, o in frames
                 if e["tid"] == tid and a <= e["ts"] and e["ts"] + e["dur"] <= b and o != owner]
    return away


# -- runs of the real command and checks of their folders, independent of the splitter ----------

CLI = [sys.executable, "-m", "stream_split.cli"]
#: Upper limit for a run that takes seconds: only a hung run ever waits this long.
PROCESS_WAIT = 60


def events_of(data: bytes) -> list:
    """The events of a whole trace (object, array or JSON Lines), parsed by the standard
    library."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    text = data.decode("utf-8", "replace").lstrip("\ufeff")
    try:
        value = json.loads(text)
    except ValueError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return value["traceEvents"] if isinstance(value, dict) else value


def _key(event) -> str:
    return json.dumps(event, sort_keys=True)


def check_pieces(out_dir: Path, input_bytes: bytes | None) -> dict:
    """The manifest of ``out_dir``, after checking it against its pieces and (when given) the
    input: every non-metadata event exactly once, every piece holding all the metadata, no file
    the manifest does not name (besides the folder's marker, which lists them all)."""
    manifest = json.loads((out_dir / "manifest.json").read_text())
    counts = manifest["counts"]
    named = {it["file"] for it in manifest["iterations"] if it["file"]}
    if manifest["outside"]["file"]:
        named.add(manifest["outside"]["file"])
    assert set(os.listdir(out_dir)) == named | {"manifest.json", FOLDER_MARKER}, \
        "no stale or stray files"
    marker = json.loads((out_dir / FOLDER_MARKER).read_text())
    assert sorted(marker["files"]) == sorted(named | {"manifest.json"})  # listing order
    seen = collections.Counter()
    metadata = None
    by_file = {it["file"]: it["events"] for it in manifest["iterations"] if it["file"]}
    by_file[manifest["outside"]["file"]] = manifest["outside"]["events"]
    for name in named:
        events = events_of((out_dir / name).read_bytes())
        meta = [_key(e) for e in events if e.get("ph") == "M"]
        body = [_key(e) for e in events if e.get("ph") != "M"]
        assert metadata is None or meta == metadata, "every piece holds the same metadata"
        metadata = meta
        assert len(body) == by_file[name], f"{name}: manifest count"
        seen.update(body)
    assert counts["conserved"] is True
    assert sum(seen.values()) == counts["events_out"] == counts["non_metadata_in"]
    if input_bytes is not None:
        expected = collections.Counter(_key(e) for e in events_of(input_bytes)
                                       if e.get("ph") != "M")
        if manifest["complete"]:
            assert seen == expected, "every input event exactly once"
        else:  # a stop: what is there came from the input, each at most as often
            assert not seen - expected, "no event that is not in the input, none duplicated"
    return manifest


def temp_prefix(parent: Path, name: str) -> str:
    """The names of the staging folders (and replaced results) of a split into parent/name."""
    return TEMP_PREFIX + target_key(str(parent / name)) + "-"


def no_staging_leftovers(parent: Path, name: str) -> None:
    left = [p for p in os.listdir(parent) if p.startswith(temp_prefix(parent, name))]
    assert left == [], f"staging leftovers: {left}"
    assert not os.path.lexists(lock_path(str(parent / name))), "the lock file is left"


def one_error_line(stderr: bytes) -> str:
    text = stderr.decode("utf-8", "replace")
    assert "Traceback" not in text, text
    lines = text.splitlines()
    assert len(lines) == 1 and lines[0].startswith("stream-split: error: "), text
    return lines[0]


@pytest.fixture(scope="session")
def long_trace(tmp_path_factory):
    """A generated trace (9.5 MB) that a split takes 0.3-1 s on, depending on the machine; the
    kill and signal tests time it before they choose their moments."""
    path = tmp_path_factory.mktemp("long") / "long.json"
    path.write_bytes(render(generate("training", 0, steps=120), "object").encode())
    return path


@pytest.fixture(scope="session")
def small_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("small") / "small.json"
    path.write_bytes(render(generate("training", 1, steps=6), "object").encode())
    return path


#: Loops the plot tests draw (name: generator scenario and parameters): 1,000 iterations, a
#: first step that waits 20x a step (0.8 ms steps, 16 ms more), CPU only, an LLM server.
PLOT_LOOPS = {
    "thousand": ("training", dict(steps=1000, layers=1, eval_every=25, eval_forwards=3,
                                  autograd_thread=False)),
    "warm_up": ("training", dict(steps=40, layers=2, slow_step=0, slow_us=16000.0)),
    "cpu_only": ("dynamic_shapes_cpu", dict(steps=20)),
    "server": ("serving_phases", dict(steps=60, warmup_decodes=2, warmup_us=3000.0)),
}


@pytest.fixture(scope="session")
def plot_folder(tmp_path_factory):
    """``plot_folder(name)``: the folder the real `split` writes for the loop ``name`` of
    ``PLOT_LOOPS``, made once a session."""
    made = {}

    def folder(name: str) -> Path:
        if name not in made:
            scenario, params = PLOT_LOOPS[name]
            root = tmp_path_factory.mktemp(f"plot-{name}")
            trace = root / f"{name}.json"
            trace.write_bytes(render(generate(scenario, 1, **params)).encode())
            run_cli("split", trace, "-o", root / "out", "-q")
            made[name] = root / "out"
        return made[name]
    return folder


def near(pixel, colour: str, tolerance=12) -> bool:
    """Whether an RGB ``pixel`` is the ``colour`` "#rrggbb", give or take ``tolerance``."""
    return all(abs(p - int(colour[i:i + 2], 16)) <= tolerance
               for p, i in zip(pixel, (1, 3, 5)))


def pixels_of(image, colour: str, box=None, tolerance=12) -> int:
    """How many pixels of a PIL RGB ``image`` (in ``box``: left, top, right, bottom) are
    ``colour``: what a person sees of it in a picture or a screenshot."""
    region = image.crop(box) if box else image
    return sum(n for n, pixel in region.getcolors(1 << 24) if near(pixel, colour, tolerance))


def start_split(trace, out, *extra, **kwargs):
    return subprocess.Popen(CLI + ["split", str(trace), "-o", str(out), *map(str, extra)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def wait_for_staging(parent: Path, name: str, proc) -> None:
    """Handshake: the run has taken its folder (so it is past start-up)."""
    deadline = time.monotonic() + PROCESS_WAIT
    while not any(p.startswith(temp_prefix(parent, name)) for p in os.listdir(parent)):
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.005)


def run_in_process(argv, capfd) -> tuple[int, str]:
    """``stream-split`` in this process (hundreds of cases in seconds); the handlers it
    installs for SIGINT/SIGTERM are put back afterwards."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            status = cli_main([str(a) for a in argv])
        except SystemExit as e:
            status = e.code
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
    return status, capfd.readouterr().err
