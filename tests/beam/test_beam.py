"""Tests of the Beam adapter (``stream_split.beam``) and of ``pipelines.split_archive``.

The records a pipeline emits must be exactly those of ``stream-split boundaries`` on the same
file, plus the trace path; unreadable files go to the dead letters; truncated ones do not.
Here the DirectRunner (in process, and with two worker processes) and the FnApiRunner; the
same job on a Dask cluster, compared with them, is in ``test_dask.py``.
"""
from __future__ import annotations

import contextlib
import glob
import gzip
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

beam = pytest.importorskip("apache_beam")

from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline  # noqa: E402
from apache_beam.testing.util import assert_that, equal_to  # noqa: E402

from stream_split import cli  # noqa: E402
from stream_split.testing import generate as g  # noqa: E402
from stream_split.beam import (  # noqa: E402
    SplitTraces, SummarizeGroups, iteration_parquet_schema)
from stream_split.core import IterationRecord, SplitOptions  # noqa: E402
from conftest import write_truncated_trace  # noqa: E402

pytestmark = pytest.mark.beam

REPO = Path(__file__).resolve().parents[2]
STEPS = SplitOptions(detector="steps")  # the structural detector is being rewritten


def _shared() -> Path | None:
    for candidate in (Path("/work/shared"), Path(__file__).resolve().parents[3] / "shared"):
        if (candidate / "traces").is_dir():
            return candidate
    return None


def cli_records(path: str) -> tuple[list[dict], bool]:
    """Iteration records of ``stream-split boundaries PATH --detector steps``; and whether
    the CLI found the input complete."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    err = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["boundaries", path, "--detector", "steps"])
    out.flush()
    # A trace without ProfilerStep#N: the CLI says so (exit 2) after its (no) records.
    assert rc == 0 or "no ProfilerStep#N" in err.getvalue(), err.getvalue()
    lines = out.buffer.getvalue().decode("utf-8").splitlines()
    records = [r for r in map(json.loads, lines) if r["type"] == "iteration"]
    return records, "incomplete input" not in err.getvalue()


def expected_beam_records(paths) -> list[dict]:
    expected = []
    for path in paths:
        records, complete = cli_records(path)
        for r in records:
            expected.append({**r, "trace": path, "complete": r["complete"] and complete})
    return expected


def run_split(paths_or_patterns, options=STEPS):
    """Run ``SplitTraces``; returns (pipeline, outputs) to attach assertions to."""
    p = BeamTestPipeline()
    out = (p | "Patterns" >> beam.Create(list(paths_or_patterns))
           | "SplitTraces" >> SplitTraces(options))
    return p, out


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> list[str]:
    """Generated traces in several shapes: object / array / JSON Lines, both file layouts."""
    root = tmp_path_factory.mktemp("generated")
    cases = [("training", {}, "object", ".json.gz"),
             ("training", {"layout": "time", "steps": 5}, "array", ".json"),
             ("sample", {}, "jsonl", ".jsonl"),
             ("single_forward", {}, "object", ".json.gz"),
             ("serving", {"steps": 6}, "object", ".json.gz")]  # no ProfilerStep: 0 records
    paths = []
    for i, (scenario, params, form, suffix) in enumerate(cases):
        path = str(root / f"{i}_{scenario}{suffix}")
        g.write_trace(g.generate(scenario, seed=i, **params), path, form=form)
        paths.append(path)
    return paths


def test_records_equal_those_of_the_cli_on_generated_traces(generated):
    expected = expected_beam_records(generated)
    assert len(expected) >= 8 + 5 + 8 + 1
    p, out = run_split(generated)
    assert_that(out.iterations, equal_to(expected), label="Records")
    assert_that(out.dead_letters, equal_to([]), label="NoDeadLetters")
    assert_that(out.summaries | beam.Map(lambda s: (s["trace"], s["iterations"], s["complete"],
                                                    s["events_out"] > 0)),
                equal_to([(t, sum(r["trace"] == t for r in expected), True, True)
                          for t in generated]), label="Summaries")
    p.run().wait_until_finish()


def test_patterns_and_matched_files_are_both_accepted(generated):
    from apache_beam.io.filesystems import FileSystems
    pattern = os.path.join(os.path.dirname(generated[0]), "*.json.gz")
    metadata = FileSystems.match([generated[2]])[0].metadata_list
    expected = expected_beam_records(sorted(glob.glob(pattern)) + [generated[2]])
    p, out = run_split([pattern, *metadata])
    assert_that(out.iterations, equal_to(expected))
    p.run().wait_until_finish()


def test_summary_numbers(generated):
    records, _ = cli_records(generated[0])
    its = [IterationRecord(**{k: v for k, v in r.items()
                              if k not in ("type", "duration_us", "wall_us")}) for r in records]
    durations = sorted(r.duration_us for r in its)
    from stream_split.beam import trace_summary
    s = trace_summary("t", its, info={"complete": True}, error=None)
    assert s["iterations"] == len(its) == 8
    assert s["median_iteration_us"] == pytest.approx((durations[3] + durations[4]) / 2, abs=1e-3)
    assert durations[6] <= s["p90_iteration_us"] <= durations[7]
    span = max(r.gpu_end_ts for r in its) - min(r.gpu_start_ts for r in its)
    assert s["gpu_busy_share"] == pytest.approx(
        sum(r.gpu_active_us for r in its) / span, abs=1e-6)
    assert 0 < s["gpu_busy_share"] <= 1
    assert s["gpu_stream_busy_ratio"] == pytest.approx(
        sum(r.gpu_busy_us for r in its) / sum(durations), abs=1e-6)


@pytest.mark.shared
def test_records_equal_those_of_the_cli_on_real_traces():
    shared = _shared()
    if shared is None:
        pytest.skip("../shared is absent")
    paths = sorted(glob.glob(str(shared / "traces/torch_cpu/*.json.gz")))
    paths.append(str(shared / "traces/tracelens/mi300/resnet_act_checkpoint.json.gz"))
    expected = expected_beam_records(paths)
    p, out = run_split(paths)
    assert_that(out.iterations, equal_to(expected), label="Records")
    assert_that(out.dead_letters, equal_to([]), label="NoDeadLetters")
    truncated = [q for q in paths if "s7_truncated" in q]
    assert_that(out.summaries | beam.Filter(lambda s: not s["complete"])
                | beam.Map(lambda s: s["trace"]), equal_to(truncated), label="Incomplete")
    p.run().wait_until_finish()


def test_group_summary_is_per_parent_directory():
    summaries = [
        {"trace": "/a/x/1.json", "iterations": 3, "median_iteration_us": 10.0, "error": None},
        {"trace": "/a/x/2.json", "iterations": 5, "median_iteration_us": 30.0, "error": None},
        {"trace": "/a/x/3.json", "iterations": 0, "median_iteration_us": None, "error": "bad"},
        {"trace": "/a/y/1.json", "iterations": 2, "median_iteration_us": 7.0, "error": None},
    ]
    with BeamTestPipeline() as p:
        groups = p | beam.Create(summaries) | SummarizeGroups()
        assert_that(groups, equal_to([
            {"group": "/a/x", "traces": 3, "failed_traces": 1, "iterations": 8,
             "median_of_median_iteration_us": 20.0},
            {"group": "/a/y", "traces": 1, "failed_traces": 0, "iterations": 2,
             "median_of_median_iteration_us": 7.0}]))


def test_parquet_schema_is_the_trace_then_every_record_field_with_its_type():
    # Every scalar field; the nested breakdown (a message of its own in records.proto) is no
    # Parquet column.
    import pyarrow as pa
    from stream_split.core.records import NESTED_FIELDS
    schema = iteration_parquet_schema()
    assert schema.names == ["trace", *(name for name in IterationRecord(index=0).to_dict()
                                       if name not in NESTED_FIELDS)]
    assert schema.field("index").type == pa.int64()
    assert schema.field("gpu_end_ts").type == pa.float64()
    assert schema.field("complete").type == pa.bool_()
    assert schema.field("first_op").type == pa.string()


def _metadata(path: str, size: int):
    from apache_beam.io.filesystem import FileMetadata
    return FileMetadata(path, size)


def test_files_are_ranked_largest_first_and_equal_sizes_by_path():
    from stream_split.beam import _ranked_by_size
    files = [_metadata("/b", 10), _metadata("/c", 30), _metadata("/a", 10), _metadata("/d", 20)]
    assert [(rank, f.path) for rank, f in _ranked_by_size(files)] == [
        (0, "/c"), (1, "/d"), (2, "/a"), (3, "/b")]


_started = []


class _RecordStart(beam.DoFn):
    def process(self, file):
        _started.append(file.path)
        yield file


def test_the_direct_runner_starts_the_largest_trace_first():
    from stream_split.beam import _SpreadBySize
    sizes = [5, 50, 7, 300, 1, 20]
    files = [_metadata(f"/t{i}", size) for i, size in enumerate(sizes)]
    _started.clear()
    with BeamTestPipeline(runner="FnApiRunner") as p:
        p | beam.Create(files) | _SpreadBySize() | beam.ParDo(_RecordStart())
    assert _started == [f.path for f in sorted(files, key=lambda f: -f.size_in_bytes)]


def test_import_without_beam_says_how_to_install(monkeypatch):
    import importlib
    monkeypatch.setitem(sys.modules, "apache_beam", None)
    monkeypatch.delitem(sys.modules, "stream_split.beam")
    with pytest.raises(ImportError, match=r"stream-split\[beam\]"):
        importlib.import_module("stream_split.beam")


# -- the archive pipeline, end to end, with two worker processes ---------------------------


@pytest.fixture(scope="module")
def archive(tmp_path_factory, generated) -> Path:
    root = tmp_path_factory.mktemp("archive")
    (root / "job1").mkdir()
    (root / "job2").mkdir()
    g.write_trace(g.generate("training", seed=1), str(root / "job1/rank0.json.gz"))
    g.write_trace(g.generate("training", seed=2, steps=6), str(root / "job1/rank1.json.gz"))
    write_truncated_trace(root / "job2/cut.json.gz", seed=3)
    (root / "job2/x.json.gz").write_bytes(bytes(range(256)) * 8)  # garbage
    return root


@pytest.mark.slow
def test_archive_pipeline_with_two_worker_processes(archive, tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "pipelines.split_archive",
           "--input", str(archive / "**" / "*.json.gz"), "--output", str(out),
           "--detector", "steps", "--pieces",
           "--direct_running_mode=multi_processing", "--direct_num_workers=2"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]

    traces = {name: str(archive / name) for name in
              ("job1/rank0.json.gz", "job1/rank1.json.gz", "job2/cut.json.gz",
               "job2/x.json.gz")}
    lines = (out / "iterations.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    by_trace = {t: sorted((r for r in records if r["trace"] == t), key=lambda r: r["index"])
                for t in traces.values()}
    assert [len(by_trace[t]) for t in traces.values()] == [8, 6, 8, 0]

    # Same records as the CLI, except the piece file names (the CLI writes none).
    def without_file(rs):
        return [{k: v for k, v in r.items() if k != "file"} for r in rs]
    for name in ("job1/rank0.json.gz", "job2/cut.json.gz"):
        assert without_file(by_trace[traces[name]]) == without_file(
            expected_beam_records([traces[name]]))
    assert all(not r["complete"] for r in by_trace[traces["job2/cut.json.gz"]])
    for r in records:  # every piece was copied out, and is a loadable Chrome trace
        with gzip.open(r["file"], "rt") as f:
            assert len(json.load(f)["traceEvents"]) >= r["events"]

    import pyarrow.parquet as pq
    table = pq.read_table(out / "iterations.parquet")
    assert table.num_rows == len(records)
    assert sorted(table.column("trace").to_pylist()) == sorted(r["trace"] for r in records)

    summaries = {s["trace"]: s for s in map(json.loads,
                                            (out / "summaries.jsonl").read_text().splitlines())}
    assert set(summaries) == set(traces.values())
    assert summaries[traces["job1/rank0.json.gz"]]["complete"] is True
    assert summaries[traces["job2/cut.json.gz"]]["complete"] is False
    assert summaries[traces["job2/cut.json.gz"]]["error"] is None
    assert summaries[traces["job2/x.json.gz"]]["error"]
    for s in summaries.values():
        assert s["events_out"] == s["events_in"] - s["metadata_events"]

    dead = [json.loads(line) for line in (out / "dead_letters.jsonl").read_text().splitlines()]
    assert [d["trace"] for d in dead] == [traces["job2/x.json.gz"]]
    # Binary garbage (NUL bytes at the start): the one-line reason the reader gives.
    assert dead[0]["error"].startswith("not UTF-8 JSON") and "\n" not in dead[0]["error"]

    groups = {d["group"]: d for d in map(json.loads,
                                         (out / "groups.jsonl").read_text().splitlines())}
    # One final line on the terminal; Beam's INFO logging stays off.
    found = sum(1 for r in records if r["kind"] == "iteration")
    last = done.stdout.splitlines()[-1]
    assert last.startswith(f"4 traces, {found} iterations, 1 failed -> {out}")
    assert "dead_letters.jsonl" in last
    assert "INFO:apache_beam" not in done.stderr  # (a worker logs its start before its level)
    job1 = summaries[traces["job1/rank0.json.gz"]], summaries[traces["job1/rank1.json.gz"]]
    assert groups[str(archive / "job1")] == {
        "group": str(archive / "job1"), "traces": 2, "failed_traces": 0, "iterations": 14,
        "median_of_median_iteration_us": round(
            (job1[0]["median_iteration_us"] + job1[1]["median_iteration_us"]) / 2, 3)}
    assert groups[str(archive / "job2")]["traces"] == 2
    assert groups[str(archive / "job2")]["failed_traces"] == 1


def test_archive_pipeline_says_when_the_input_matches_no_file(tmp_path):
    cmd = [sys.executable, "-m", "pipelines.split_archive",
           "--input", str(tmp_path / "none" / "*.json.gz"), "--output", str(tmp_path / "out")]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "no file matches --input" in done.stderr
    assert not (tmp_path / "out").exists()


def test_groups_name_directories_as_the_summaries_name_traces():
    from stream_split.beam import trace_group
    assert trace_group("traces/job1/rank0.json.gz") == "traces/job1"
    assert trace_group("/abs/job1/rank0.json.gz") == "/abs/job1"
    assert trace_group("gs://bucket/job1/rank0.json.gz") == "gs://bucket/job1"
