"""The library: ``stream_split.split`` writes pieces like the CLI; options are checked."""
from __future__ import annotations

import json
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

import stream_split
import stream_split.library
from stream_split.config import SplitConfig
from stream_split.core import Splitter, SplitOptions
from stream_split.errors import (
    OptionError, OptionHadNoEffect, OptionWarning, OutputError, StreamSplitError,
    TraceInputError)
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
    with pytest.raises(OptionHadNoEffect, match="use detector='auto'"):
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


# -- typed, strictly checked options; errors of one family, in library terms ---------------

@pytest.mark.parametrize("options, message", [
    ({"overwrite": "no"}, "overwrite must be True or False, not 'no'"),
    ({"overwrite": "false"}, "overwrite must be True or False"),
    ({"overwrite": 1}, "overwrite must be True or False"),
    ({"plot": "no"}, "plot must be True or False, not 'no'"),
    ({"compress": "yes"}, "compress must be True or False"),
    ({"compresslevel": True}, "compresslevel must be an integer 0..9"),
    ({"level": True}, "level must be an integer >= 0"),
    ({"pending_limit": "100"}, "pending_limit must be an integer >= 1"),
    ({"iterations": ["1", "2"]}, "iterations must be None, a list of indices"),
    ({"steps": 15}, "steps must be a string"),
    ({"name_by": "steps"}, "name_by must be one of index, step"),
])
def test_a_value_of_the_wrong_type_is_an_option_error_not_a_truth_value(tmp_path, options,
                                                                         message):
    trace = step_trace(tmp_path / "t.json.gz", S1_LIKE)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(OptionError, match=message):
        stream_split.split(trace, tmp_path / "out", **options)
    assert (tmp_path / "out" / "keep.txt").read_text() == "mine"
    assert not (tmp_path / "out" / "iterations.png").exists()


def test_names_that_look_like_flags_are_paths_never_a_system_exit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    step_trace(tmp_path / "-h", S1_LIKE)
    manifest = stream_split.split("-h", "--help")
    assert manifest.complete and (tmp_path / "--help" / "manifest.json").is_file()
    with pytest.raises(TraceInputError, match="no such file: --version"):
        stream_split.split("--version", "out")


def test_a_path_of_another_type_is_an_option_error(tmp_path):
    with pytest.raises(OptionError, match="trace must be a path"):
        stream_split.split(3, tmp_path / "out")


def test_every_library_error_is_a_stream_split_error_in_library_terms(tmp_path):
    trace = step_trace(tmp_path / "t.json.gz", S1_LIKE)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.txt").write_text("old")
    with pytest.raises(OutputError) as caught:
        stream_split.split(trace, tmp_path / "out")
    assert isinstance(caught.value, StreamSplitError)
    assert "overwrite=True" in str(caught.value) and "--overwrite" not in str(caught.value)
    assert "--overwrite replaces an earlier output" in caught.value.cli_message
    with pytest.raises(StreamSplitError):
        stream_split.split(tmp_path / "missing.json", tmp_path / "out2")
    with pytest.raises(StreamSplitError):
        stream_split.split(trace, tmp_path / "out3", iterations="nonsense")


def test_a_level_that_is_not_there_is_a_warning_in_library_terms(tmp_path):
    trace = step_trace(tmp_path / "t.json.gz", [1000] * 4)
    with pytest.warns(OptionWarning, match="level=5 is not available"):
        manifest = stream_split.split(trace, tmp_path / "out", level=5)
    assert manifest.complete


def test_split_config_is_frozen_and_checked():
    config = SplitConfig()
    with pytest.raises(FrozenInstanceError):
        config.overwrite = True
    with pytest.raises(OptionError, match="overwrite"):
        SplitConfig(overwrite="no")


def test_the_library_does_not_depend_on_the_command_line():
    source = Path(stream_split.library.__file__).read_text()
    assert "stream_split.cli" not in source and "argparse" not in source
