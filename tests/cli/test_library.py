"""The library: ``stream_split.split`` writes pieces like the CLI; options are checked."""
from __future__ import annotations

import json

import pytest

import stream_split
from stream_split.core import Splitter, SplitOptions
from stream_split.options import OptionHadNoEffect
from stream_split.read import TraceInputError
from test_results import S1_LIKE, step_trace


def test_split_writes_the_pieces_and_returns_the_manifest(tmp_path):
    trace = step_trace(tmp_path / "t.json.gz", S1_LIKE)
    manifest = stream_split.split(trace, tmp_path / "out")
    assert manifest == json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest.complete and manifest.stop_reason is None
    assert manifest.steady_state == {"first": 0, "last": 5}
    assert [it["outlier"] for it in manifest.iterations] == [False, True, False, False,
                                                            False, True]
    assert (tmp_path / "out" / "iteration_00005.json.gz").is_file()


def test_split_of_a_truncated_trace_says_why_it_stopped(tmp_path):
    trace = step_trace(tmp_path / "t.json.gz", S1_LIKE)
    import gzip
    cut = tmp_path / "cut.json"
    data = gzip.decompress(trace.read_bytes())
    cut.write_bytes(data[: len(data) * 2 // 3])
    manifest = stream_split.split(cut, tmp_path / "out")
    assert not manifest.complete and manifest.stop_reason


@pytest.mark.parametrize("options, message", [
    ({"detector": "step"}, "detector must be one of auto, structure, steps"),
    ({"level": -1}, "level must be"),
    ({"compresslevel": 12}, "compresslevel"),
    ({"iterations": "a-b"}, "not a list of iterations"),
])
def test_bad_options_are_errors_that_name_them(tmp_path, options, message):
    trace = step_trace(tmp_path / "t.json.gz", S1_LIKE)
    with pytest.raises(ValueError, match=message):
        stream_split.split(trace, tmp_path / "out", **options)
    assert not (tmp_path / "out").exists()


def test_split_options_reject_a_misspelt_detector():
    with pytest.raises(ValueError, match="'step'"):
        SplitOptions(detector="step")


def test_an_option_that_would_do_nothing_raises(tmp_path):
    trace = step_trace(tmp_path / "t.json.gz", S1_LIKE)
    with pytest.raises(OptionHadNoEffect, match="matches none"):
        stream_split.split(trace, tmp_path / "out", iterations=[10, 11])
    plain = step_trace(tmp_path / "p.json.gz", [1000] * 5, annotated=False)
    with pytest.raises(OptionHadNoEffect, match="--detector auto"):
        stream_split.split(plain, tmp_path / "out", detector="steps")


def test_unreadable_input_raises(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    with pytest.raises(TraceInputError):
        stream_split.split(bad, tmp_path / "out")


def test_durations_are_rounded_as_in_the_manifest(tmp_path):
    trace = step_trace(tmp_path / "t.json.gz", [1000.123456, 999.98765, 1000.5, 1000.25])
    manifest = stream_split.split(trace, tmp_path / "out")
    records = list(stream_split.iterations(str(trace)))
    assert [r.duration_us for r in records] == [it["duration_us"]
                                                for it in manifest.iterations]
    assert all(r.duration_us == round(r.duration_us, 3) for r in records)


def test_gpu_active_time_is_a_share_of_the_gpu_span():
    from stream_split.testing.generate import generate
    trace = generate("training", seed=3)
    splitter = Splitter(SplitOptions(keep_events=False))
    for event in trace.events:
        splitter.feed(event)
    splitter.close()
    busy = [r for r in splitter.iterations if r.kernels]
    assert busy
    for r in busy:
        assert 0 < r.gpu_active_us <= r.gpu_busy_us + 1e-6
        assert r.gpu_active_us <= r.gpu_end_ts - r.gpu_start_ts + 1e-6
