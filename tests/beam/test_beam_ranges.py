"""One trace split across Beam workers (``stream_split.beam_ranges``, the archive job's
``--split-large-over``): each large trace's pieces and manifest are those ``stream-split split``
writes (pieces compared gunzipped: their gzip members are cut elsewhere), its records those
of the manifest, on the DirectRunner in one process and with two worker processes. The same
on a real two-worker Dask cluster is in ``test_dask.py`` (``assert_split_as_the_cli``).

The ranges are made small (``--range-bytes``) so that generated traces are cut in many; a
trace that cannot be cut (a cut inside an event, an array cut short, JSON Lines) goes the
usual way, and its summary says so (``ranges`` null).
"""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

beam = pytest.importorskip("apache_beam")

import stream_split  # noqa: E402
from stream_split.testing import generate as g  # noqa: E402

pytestmark = pytest.mark.beam

REPO = Path(__file__).resolve().parents[2]
#: Traces over this many bytes are split in ranges of ``RANGE_BYTES`` in these tests.
LARGE_OVER = 40 << 10
RANGE_BYTES = 64 << 10
#: Runner arguments of the DirectRunner, in one process and with two worker processes.
DIRECT = {"direct": [],
          "direct_multi_processing": ["--direct_running_mode=multi_processing",
                                      "--direct_num_workers=2"]}


def nested_events_trace(path: Path, events: int = 3000) -> None:
    """Events whose ``args`` hold objects on lines of their own: some cuts (``},`` before a
    line break) fall inside an event; a ``ProfilerStep`` over every hundred."""
    lines = []
    for k in range(events):
        if k % 100 == 0:
            lines.append('{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#'
                         f'{k // 100}", "pid": 1, "tid": 1, "ts": {k * 10}, "dur": 998}}')
        lines.append('{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, '
                     f'"ts": {k * 10}, "dur": 5, "args": {{"list": [{{"a": {k}}},\n'
                     f'{{"b": {k}}}]}}}}')
    path.write_text('{"traceEvents": [\n' + ",\n".join(lines) + "\n]}\n")


def make_archive(root: Path) -> dict:
    """{name: (path, whether it is cut in ranges)}: two large generated traces, one small,
    and three large ones that cannot be cut."""
    root.mkdir(parents=True, exist_ok=True)
    traces = {"large": (root / "large.json.gz", True), "array": (root / "array.json", True),
              "small": (root / "small.json.gz", False),
              "nested": (root / "nested.json", False), "cut": (root / "cut.json", False),
              "lines": (root / "lines.jsonl", False)}
    g.write_trace(g.generate("training", seed=3, steps=60), str(traces["large"][0]))
    g.write_trace(g.generate("training", seed=4, steps=12), str(traces["array"][0]),
                  form="array")
    g.write_trace(g.generate("training", seed=5, steps=3), str(traces["small"][0]))
    nested_events_trace(traces["nested"][0])
    g.write_trace(g.generate("training", seed=6, steps=12), str(traces["cut"][0]),
                  form="array", close_array=False)
    g.write_trace(g.generate("training", seed=7, steps=12), str(traces["lines"][0]),
                  form="jsonl")
    assert os.path.getsize(traces["small"][0]) < LARGE_OVER
    assert all(os.path.getsize(path) > LARGE_OVER for name, (path, _) in traces.items()
               if name != "small")
    return traces


def split_archive(inputs: list, out: Path, runner_args: list, *, large_over: int = LARGE_OVER,
                  range_bytes: int = RANGE_BYTES, timeout: float = 600) -> None:
    argv = [sys.executable, "-m", "pipelines.split_archive", "--output", str(out),
            "--detector", "steps", "--pieces", "--split-large-over", str(large_over),
            "--range-bytes", str(range_bytes), *runner_args]
    for pattern in inputs:
        argv += ["--input", str(pattern)]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]


def folder_contents(out: Path) -> dict:
    """{file: bytes, gunzipped} of a split's folder (its pieces and manifest); the CLI's
    mark of a folder it wrote (``.stream-split``) left out."""
    contents = {}
    for path in sorted(out.rglob("*")):
        if path.is_file() and path.name != ".stream-split":
            data = path.read_bytes()
            contents[str(path.relative_to(out))] = (gzip.decompress(data)
                                                    if path.suffix == ".gz" else data)
    return contents


def jsonl(path: Path) -> list:
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_split_as_the_cli(traces: dict, out: Path, cli_dir: Path) -> None:
    """Every trace's pieces, manifest and records as ``stream-split split`` gives them (the
    CLI's folders made once in ``cli_dir``); those that could be cut were split in ranges."""
    summaries = {s["trace"]: s for s in jsonl(out / "summaries.jsonl")}
    rows = jsonl(out / "iterations.jsonl")
    assert jsonl(out / "dead_letters.jsonl") == []
    for name, (trace, in_ranges) in traces.items():
        summary = summaries[str(trace)]
        assert (summary["ranges"] is not None) == in_ranges, (name, summary)
        if in_ranges:
            assert summary["ranges"] > 2, summary
        expected = cli_dir / name
        if not expected.is_dir():
            stream_split.split(str(trace), expected, detector="steps")
        got = Path(summary["pieces"])
        first, second = folder_contents(expected), folder_contents(got)
        assert first.keys() == second.keys(), name
        for file in first:
            assert first[file] == second[file], (name, file)
        manifest = json.loads(first["manifest.json"])
        assert summary["complete"] == manifest["complete"]
        assert summary["events_in"] == manifest["counts"]["events_in"]
        # The records are the manifest's entries, but for the comparison with a baseline
        # that the manifest adds to an outlier's reason (read from the pieces).
        entries = [{**e, "file": str(got / e["file"]) if e["file"] else None}
                   for e in manifest["iterations"]]
        records = sorted(({k: v for k, v in r.items() if k not in ("type", "trace")}
                          for r in rows if r["trace"] == str(trace)), key=lambda r: r["index"])
        assert len(records) == len(entries)
        for record, entry in zip(records, entries):
            assert (entry.pop("outlier_reason") or "").startswith(
                record.pop("outlier_reason") or ""), name
            assert record == entry, name
    assert not (out / ".ranges").exists(), "the ranges' files were left behind"


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> tuple[dict, Path]:
    """The archive's traces, and a folder for the CLI's splits of them."""
    root = tmp_path_factory.mktemp("ranges")
    return make_archive(root / "traces"), root / "cli"


@pytest.mark.parametrize("runner", sorted(DIRECT))
def test_a_large_trace_split_across_workers_gives_the_clis_pieces_and_records(
        runner, archive, tmp_path):
    traces, cli_dir = archive
    split_archive([p for p, _ in traces.values()], tmp_path / "out", DIRECT[runner])
    assert_split_as_the_cli(traces, tmp_path / "out", cli_dir)


def test_records_only_in_ranges_are_the_records_of_one_stream(archive, tmp_path):
    """Without ``--pieces``, no segment is written: the records and summaries are those of
    the usual path."""
    traces, _ = archive
    inputs = [traces[name][0] for name in ("large", "nested")]
    outputs = {}
    for name, over in (("ranges", 0), ("whole", 1 << 40)):
        out = tmp_path / name
        argv = [sys.executable, "-m", "pipelines.split_archive", "--output", str(out),
                "--detector", "steps", "--split-large-over", str(over),
                "--range-bytes", str(RANGE_BYTES), *sum((["--input", str(p)] for p in inputs), [])]
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        summaries = jsonl(out / "summaries.jsonl")
        ranges = {s["trace"]: s.pop("ranges") for s in summaries}
        for s in summaries:
            s.pop("seconds")
        outputs[name] = (sorted(map(json.dumps, jsonl(out / "iterations.jsonl"))),
                         sorted(map(json.dumps, summaries)), ranges)
    assert outputs["ranges"][:2] == outputs["whole"][:2]
    assert outputs["ranges"][2][str(traces["large"][0])] > 2
    assert outputs["ranges"][2][str(traces["nested"][0])] is None
    assert set(outputs["whole"][2].values()) == {None}


def test_a_trace_split_in_ranges_past_its_time_budget_is_a_dead_letter(long_trace, tmp_path):
    """The budget counts the engine's run (``Decide``): stopped, the trace is a dead letter,
    its summary says in how many ranges it was cut, and its ranges' files are removed."""
    from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
    from apache_beam.testing.util import assert_that
    from stream_split.beam import SplitTraces

    def check_dead_letters(letters):
        assert [row["error"] for row in letters] == [
            "took longer than its time budget of 0.05 s"]

    def check_summaries(summaries):
        assert [s["ranges"] > 2 and not s["complete"] for s in summaries] == [True]

    with BeamTestPipeline() as p:
        out = p | beam.Create([str(long_trace)]) | SplitTraces(
            time_budget=0.05, split_large_over=0, range_bytes=1 << 20,
            pieces_prefix=str(tmp_path / "pieces"), scratch_prefix=str(tmp_path / "ranges"))
        assert_that(out.dead_letters, check_dead_letters, label="dead")
        assert_that(out.summaries, check_summaries, label="summaries")
    assert list((tmp_path / "ranges").iterdir()) == []


def test_a_size_is_read_with_its_unit():
    from pipelines.split_archive import build_parser
    args = build_parser().parse_args(["--input", "x", "--output", "y",
                                      "--split-large-over", "2G", "--range-bytes", "512k"])
    assert (args.split_large_over, args.range_bytes) == (2 << 30, 512 << 10)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--input", "x", "--output", "y", "--split-large-over", "2X"])


# -- the 40x tile (issue 24's acceptance) ---------------------------------------------------

#: The tile of 40 copies of the shared resnet trace (2.26 M events, 40 MB of .json.gz), as
#: ``benchmarks/bench.py`` caches it, or made here when ../shared is present.
TILE_COPIES = 40
BENCH_DIR = Path("/tmp/stream-split-bench")
TILE_BASE = "tracelens/mi300/resnet_act_checkpoint.json.gz"


def tile_40x() -> Path:
    """The 40x tile (made once, with ``../shared/tools/tile_trace.py``); skips without it."""
    from conftest import SHARED, SHARED_TRACES
    tile = BENCH_DIR / f"resnet_act_checkpoint-x{TILE_COPIES}.json.gz"
    if not tile.exists():
        tiler = SHARED / "tools" / "tile_trace.py"
        if not (tiler.exists() and (SHARED_TRACES / TILE_BASE).exists()):
            pytest.skip("no 40x tile and no ../shared to make one")
        BENCH_DIR.mkdir(parents=True, exist_ok=True)
        partial = BENCH_DIR / f".partial-test-x{TILE_COPIES}.json.gz"
        subprocess.run([sys.executable, str(tiler), str(SHARED_TRACES / TILE_BASE),
                        str(partial), "--copies", str(TILE_COPIES)], check=True)
        os.replace(partial, tile)
    return tile


def split_tile_as_the_cli(runner_args: list, tmp_path: Path) -> None:
    """The 40x tile split in 4 MiB ranges over two workers gives the CLI's folder."""
    tile = tile_40x()
    split_archive([tile], tmp_path / "out", runner_args, large_over=0,
                  range_bytes=4 << 20, timeout=1800)
    assert_split_as_the_cli({"tile": (tile, True)}, tmp_path / "out", tmp_path / "cli")


@pytest.mark.slow
def test_the_40x_tile_split_across_two_direct_workers_gives_the_clis_output(tmp_path):
    split_tile_as_the_cli(DIRECT["direct_multi_processing"], tmp_path)
