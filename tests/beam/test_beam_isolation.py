"""Issue 12, Beam: one bad trace never fails the archive job (``_SplitTraceFn._isolated``).

An archive of good traces, a type-confused trace, a corrupt gzip and a truncated trace: every
good trace's records come out, the type-confused one with its invalid events counted, the
corrupt gzip as one dead letter, the truncated one as ``complete: false``. An exception forced
inside one trace's split makes that trace a dead letter while the job goes on.
"""
from __future__ import annotations

import gzip
import json
import os

import pytest

beam = pytest.importorskip("apache_beam")

from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline  # noqa: E402
from apache_beam.testing.util import assert_that  # noqa: E402

from stream_split.beam import (  # noqa: E402
    DEAD_LETTERS, ITERATIONS, SUMMARIES, SplitTraces, _SplitTraceFn)
from stream_split.core import SplitOptions  # noqa: E402
from stream_split.testing.generate import generate, render  # noqa: E402

pytestmark = pytest.mark.beam

STEPS = SplitOptions(detector="steps")


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("archive")
    paths = {}

    def put(name: str, data: bytes) -> None:
        paths[name] = str(root / name)
        (root / name).write_bytes(data)

    good = [render(generate("training", seed, steps=4), "object") for seed in (0, 1)]
    put("good0.json.gz", gzip.compress(good[0].encode()))
    put("good1.json", good[1].encode())
    trace = json.loads(good[0])
    confused = [i for i, e in enumerate(trace["traceEvents"]) if e.get("cat") == "cpu_op"][:3]
    for i in confused:
        trace["traceEvents"][i]["dur"] = "5"
    put("confused.json", json.dumps(trace).encode())
    put("corrupt.json.gz", gzip.compress(good[1].encode())[:40] + b"\x00garbage" * 64)
    put("truncated.json", good[1].encode()[: len(good[1]) // 2])
    paths["confused_count"] = len(confused)
    return paths


def _by_trace(items) -> dict:
    out = {}
    for item in items:
        out.setdefault(item["trace"], []).append(item)
    return out


def test_an_archive_with_bad_traces_writes_every_good_traces_records(archive, tmp_path):
    names = ["good0.json.gz", "good1.json", "confused.json", "corrupt.json.gz", "truncated.json"]
    paths = {name: archive[name] for name in names}
    pieces = tmp_path / "pieces"

    def check_records(records):
        by = _by_trace(records)
        for name in ("good0.json.gz", "good1.json"):
            assert len(by[paths[name]]) == 4 and all(r["complete"] for r in by[paths[name]])
        assert len(by[paths["confused.json"]]) == 4
        assert by[paths["truncated.json"]] and not any(
            r["complete"] for r in by[paths["truncated.json"]])
        assert paths["corrupt.json.gz"] not in by

    def check_summaries(summaries):
        by = {s["trace"]: s for s in summaries}
        assert set(by) == set(paths.values())
        assert by[paths["confused.json"]]["invalid_events"] == archive["confused_count"]
        assert by[paths["confused.json"]]["error"] is None
        assert by[paths["truncated.json"]]["complete"] is False
        assert by[paths["truncated.json"]]["error"] is None
        assert by[paths["corrupt.json.gz"]]["error"]
        for name in ("good0.json.gz", "good1.json", "confused.json"):
            assert by[paths[name]]["complete"] is True

    def check_dead_letters(letters):
        assert [d["trace"] for d in letters] == [paths["corrupt.json.gz"]]
        assert "gzip" in letters[0]["error"]

    with BeamTestPipeline() as p:
        out = (p | beam.Create(sorted(paths.values()))
               | SplitTraces(STEPS, pieces_prefix=str(pieces)))
        assert_that(out.iterations, check_records, label="records")
        assert_that(out.summaries, check_summaries, label="summaries")
        assert_that(out.dead_letters, check_dead_letters, label="dead")
    manifests = [json.loads((pieces / d / "manifest.json").read_text())
                 for d in os.listdir(pieces)]
    confused = next(m for m in manifests if m["input"] == paths["confused.json"])
    assert confused["counts"]["invalid"] == archive["confused_count"]
    assert all(m["counts"]["conserved"] for m in manifests)


class _FailsInsideOneTrace(_SplitTraceFn):
    """The real ``_SplitTraceFn``, except that one named trace's split fails once its records
    are made (a stand-in for a bug that a trace triggers): nothing of that trace may come out."""

    def __init__(self, broken: str):
        super().__init__(STEPS)
        self._broken = broken

    def _split_one(self, path, size, scratch):
        result = super()._split_one(path, size, scratch)
        if path == self._broken:
            assert result.rows, "the records were made before the failure"
            raise RuntimeError("forced failure inside the split\nsecond line")
        return result


def test_an_exception_inside_one_traces_split_makes_it_a_dead_letter(archive):
    good, broken = archive["good0.json.gz"], archive["good1.json"]

    def check_records(records):
        assert {r["trace"] for r in records} == {good} and len(records) == 4

    def check_dead_letters(letters):
        assert letters == [{"trace": broken,
                            "error": "RuntimeError: forced failure inside the split"}]

    def check_summaries(summaries):
        by = {s["trace"]: s for s in summaries}
        assert by[good]["error"] is None and by[good]["iterations"] == 4
        assert by[broken]["error"].startswith("RuntimeError") and by[broken]["iterations"] == 0

    with BeamTestPipeline() as p:
        out = (p | beam.Create([good, broken])
               | beam.ParDo(_FailsInsideOneTrace(broken)).with_outputs(
                   SUMMARIES, DEAD_LETTERS, main=ITERATIONS))
        assert_that(out[ITERATIONS], check_records, label="records")
        assert_that(out[DEAD_LETTERS], check_dead_letters, label="dead")
        assert_that(out[SUMMARIES], check_summaries, label="summaries")
