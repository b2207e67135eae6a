"""Beam on a real ``dask.distributed`` cluster: ``stream_split.dask_runner`` and the archive job.

A scheduler and two worker processes are started on 127.0.0.1 (free ports, each its own
process, the repository importable there) for the module, and always shut down. The archive
pipeline must give the same outputs there as on the DirectRunner with two worker processes
and on the FnApiRunner. Beam's own DaskRunner is run once too, to show that the defects the
project's runner fixes are still there (when that test fails, Beam has fixed them: recheck
``stream_split.dask_runner`` against that version).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

beam = pytest.importorskip("apache_beam")
pytest.importorskip("distributed", reason="needs the [dask] extra")

from conftest import (  # noqa: E402
    SHARED_TRACES, write_corrupt_gzip_trace, write_truncated_trace)
from stream_split.testing import generate as g  # noqa: E402

pytestmark = [pytest.mark.beam, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
WORKERS = 2
#: Small real traces, one of them truncated, added to the archive when ../shared is present.
SHARED_SAMPLE = ("torch_cpu/s1_schedule_step.json.gz", "torch_cpu/s7_truncated.json.gz",
                 "torch_cpu/s3_repeat_cycle1.pt.trace.json.gz")


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """``tcp://127.0.0.1:PORT`` of a scheduler with two single-threaded worker processes."""
    from stream_split.testing.dask_cluster import local_dask_cluster
    # This module's DoFns are pickled by reference: the workers import it from tests/beam/
    # (and conftest from tests/).
    with local_dask_cluster(WORKERS, tmp_path_factory.mktemp("dask"), cwd=str(REPO),
                            python_path=[str(REPO), str(REPO / "tests"),
                                         str(Path(__file__).resolve().parent)]) as address:
        yield address


# -- the runner fix, on minimal pipelines -------------------------------------------------


class _LogProcessing(beam.DoFn):
    """Passes elements on; appends "element pid" to a file for each one it processes."""

    def __init__(self, log: str):
        self._log = log

    def process(self, element):
        # Long enough that the scheduler hands the partitions to both workers rather than
        # running them all next to their (tiny) input.
        time.sleep(0.05)
        with open(self._log, "a") as f:
            f.write(f"{element} {os.getpid()}\n")
        yield element


class _SplitByThree(beam.DoFn):
    def process(self, n):
        yield beam.pvalue.TaggedOutput("threes", n) if n % 3 == 0 else n


def _tagged_and_partitioned(p, log: str, out: Path) -> None:
    """Two tagged outputs, a Partition, four written leaves (one with runner sharding)."""
    numbers = (p | beam.Create([12]) | beam.FlatMap(lambda n: list(range(n))) | beam.Reshuffle()
               | beam.ParDo(_LogProcessing(log)))
    others, threes = numbers | beam.ParDo(_SplitByThree()).with_outputs("threes", main="others")
    even, odd = numbers | beam.Partition(lambda n, _: n % 2, 2)
    for name, pcoll in (("others", others), ("threes", threes), ("even", even)):
        pcoll | f"Write{name}" >> beam.io.WriteToText(str(out / name), shard_name_template="")
    odd | "WriteOdd" >> beam.io.WriteToText(str(out / "odd"))  # names its files in finish_bundle


def _written(out: Path, name: str) -> list[int] | None:
    files = sorted(out.glob(f"{name}*"))
    if not files:
        return None
    return sorted(int(line) for f in files for line in f.read_text().split())


def _run_on_dask(runner, address: str, build) -> None:
    from apache_beam.options.pipeline_options import PipelineOptions
    pipeline = beam.Pipeline(runner=runner, options=PipelineOptions(
        [f"--dask_client_address={address}"]))
    build(pipeline)
    result = pipeline.run()
    try:
        result.wait_until_finish()
    finally:
        result.client.close()


def test_every_output_is_written_with_only_its_own_elements(dask_cluster, tmp_path):
    from stream_split.dask_runner import DaskRunner
    log = tmp_path / "processed.log"
    _run_on_dask(DaskRunner(), dask_cluster,
                 lambda p: _tagged_and_partitioned(p, str(log), tmp_path))
    assert _written(tmp_path, "others") == [n for n in range(12) if n % 3]
    assert _written(tmp_path, "threes") == [0, 3, 6, 9]
    assert _written(tmp_path, "even") == [0, 2, 4, 6, 8, 10]
    assert _written(tmp_path, "odd") == [1, 3, 5, 7, 9, 11]
    assert not list(tmp_path.glob("beam-temp-*")), "every write was finalized"
    processed = [line.split() for line in log.read_text().splitlines()]
    # Once each, although four writes read the numbers (side inputs are not recomputed) ...
    assert sorted(int(n) for n, _ in processed) == list(range(12))
    # ... and on both workers, although the pipeline starts from one element.
    assert len({pid for _, pid in processed}) == WORKERS


def test_beams_own_dask_runner_still_has_the_defects_fixed_here(dask_cluster, tmp_path):
    from apache_beam.runners.dask.dask_runner import DaskRunner as BeamDaskRunner
    log = tmp_path / "processed.log"
    _run_on_dask(BeamDaskRunner(), dask_cluster,
                 lambda p: _tagged_and_partitioned(p, str(log), tmp_path))
    # Only the last leaf was computed, and of its four files none holds its elements.
    assert [_written(tmp_path, name) for name in ("others", "threes", "even")] == [None] * 3
    assert _written(tmp_path, "odd") != [1, 3, 5, 7, 9, 11]


def test_split_traces_refuses_beams_own_dask_runner():
    from apache_beam.runners.dask.dask_runner import DaskRunner as BeamDaskRunner
    from stream_split.beam import SplitTraces
    pipeline = beam.Pipeline(runner=BeamDaskRunner())
    with pytest.raises(ValueError, match=r"stream_split\.dask_runner\.DaskRunner"):
        pipeline | beam.Create(["*.json.gz"]) | SplitTraces()


def test_a_beam_version_the_runner_was_not_checked_on_is_refused():
    from stream_split.dask_runner import check_beam_version
    check_beam_version("2.77.0")
    with pytest.raises(RuntimeError, match="checked on Apache Beam 2.77"):
        check_beam_version("2.78.0")


def test_a_reshuffle_deals_every_partition_over_all_and_a_group_keeps_their_number():
    """Ranges cut by one task (one partition) are dealt over every partition; a group after
    a ``Flatten`` (its inputs' partitions added up) is over as many as configured."""
    import dask
    import dask.bag as db
    from stream_split.dask_runner import _partitioned, _reshuffle
    one = db.from_delayed([dask.delayed(list)(range(20)),
                           *(dask.delayed(list)([]) for _ in range(7))])
    parts = _reshuffle(one, 4).to_delayed()
    assert [len(p) for p in dask.compute(*parts, scheduler="sync")] == [5, 5, 5, 5]
    assert sorted(_reshuffle(one, 4).compute(scheduler="sync")) == list(range(20))
    many = db.concat([db.from_sequence(range(10), npartitions=10)] * 3)
    assert _partitioned(many, 8).npartitions == 8
    assert sorted(_partitioned(many, 8).compute(scheduler="sync")) == sorted([*range(10)] * 3)
    assert _partitioned(one, 16).npartitions == 16


# -- the archive pipeline on three runners ---------------------------------------------------


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    """Generated traces of several sizes in two groups, a truncated trace, a corrupt gzip, a
    file that is not a trace; small real traces when ../shared is present."""
    root = tmp_path_factory.mktemp("archive")
    (root / "job1").mkdir()
    (root / "job2").mkdir()
    for rank in range(4):
        g.write_trace(g.generate("training", seed=rank, steps=4 + 2 * rank),
                      str(root / f"job1/rank{rank}.json.gz"))
    write_truncated_trace(root / "job2/cut.json.gz")
    write_corrupt_gzip_trace(root / "job2/corrupt.json.gz")
    (root / "job2/garbage.json.gz").write_bytes(bytes(range(256)) * 8)
    if SHARED_TRACES.is_dir():
        (root / "shared").mkdir()
        for name in SHARED_SAMPLE:
            shutil.copy(SHARED_TRACES / name, root / "shared" / Path(name).name)
    return root


RUNNERS = {
    "dask": ["--runner=apache_beam.runners.dask.dask_runner.DaskRunner"],
    "fnapi": ["--runner=FnApiRunner"],
    "direct_multi_processing": ["--direct_running_mode=multi_processing",
                                f"--direct_num_workers={WORKERS}"],
}


def _split_archive(archive: Path, out: Path, runner_args: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.split_archive",
         "--input", str(archive / "**" / "*.json.gz"), "--output", str(out),
         "--detector", "steps", "--pieces", *runner_args],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return time.perf_counter() - started


def _outputs(out: Path) -> dict[str, list[str]]:
    """Every output as sorted JSON lines, with the output directory and the timings taken out
    (the only things that may differ between two runs)."""
    import pyarrow.parquet as pq

    def rows(values):
        lines = []
        for row in values:
            row = {k: v.replace(str(out), "OUT") if isinstance(v, str) else v
                   for k, v in row.items() if k != "seconds"}
            lines.append(json.dumps(row, sort_keys=True))
        return sorted(lines)

    outputs = {name: rows(map(json.loads, (out / f"{name}.jsonl").read_text().splitlines()))
               for name in ("iterations", "summaries", "dead_letters", "groups")}
    outputs["parquet"] = rows(pq.read_table(out / "iterations.parquet").to_pylist())
    return outputs


def test_archive_outputs_are_identical_on_dask_fnapi_and_direct_runners(
        archive, dask_cluster, tmp_path):
    outputs, seconds = {}, {}
    for name, args in RUNNERS.items():
        extra = [f"--dask_client_address={dask_cluster}"] if name == "dask" else []
        seconds[name] = _split_archive(archive, tmp_path / name, args + extra)
        outputs[name] = _outputs(tmp_path / name)
    print("wall seconds per runner:", seconds)

    dask = outputs.pop("dask")
    for name, other in outputs.items():
        for output in dask:
            assert dask[output] == other[output], f"{output}: dask != {name}"

    summaries = {s["trace"]: s for s in map(json.loads, dask["summaries"])}
    traces = sorted(str(p) for p in archive.rglob("*.json.gz"))
    assert sorted(summaries) == traces
    for trace, summary in summaries.items():
        assert summary["bytes"] == os.path.getsize(trace)
    for row in map(json.loads, (tmp_path / "dask/summaries.jsonl").read_text().splitlines()):
        assert row["seconds"] >= 0
    dead = sorted(json.loads(line)["trace"] for line in dask["dead_letters"])
    assert dead == [str(archive / "job2/corrupt.json.gz"), str(archive / "job2/garbage.json.gz")]
    truncated = [t for t, s in summaries.items() if s["error"] is None and not s["complete"]]
    assert str(archive / "job2/cut.json.gz") in truncated
    if SHARED_TRACES.is_dir():
        assert str(archive / "shared/s7_truncated.json.gz") in truncated
    iterations = [json.loads(line) for line in dask["iterations"]]
    assert {r["trace"] for r in iterations} >= {str(archive / f"job1/rank{i}.json.gz")
                                                for i in range(4)}
    for row in iterations:  # every piece was copied out of the Dask workers
        assert Path(row["file"].replace("OUT", str(tmp_path / "dask"))).is_file()


# -- one large trace across the Dask workers -------------------------------------------------


def _on_dask(address: str) -> list[str]:
    return ["--runner=stream_split.dask_runner.DaskRunner", f"--dask_client_address={address}"]


def test_a_large_trace_split_across_dask_workers_gives_the_clis_pieces_and_records(
        dask_cluster, tmp_path):
    """``--split-large-over`` on the cluster (``test_beam_ranges.py`` on the DirectRunner)."""
    from test_beam_ranges import assert_split_as_the_cli, make_archive, split_archive
    traces = make_archive(tmp_path / "traces")
    split_archive([p for p, _ in traces.values()], tmp_path / "out", _on_dask(dask_cluster))
    assert_split_as_the_cli(traces, tmp_path / "out", tmp_path / "cli")


def test_the_40x_tile_split_across_two_dask_workers_gives_the_clis_output(
        dask_cluster, tmp_path):
    from test_beam_ranges import split_tile_as_the_cli
    split_tile_as_the_cli(_on_dask(dask_cluster), tmp_path)
