"""Every front end takes the same path: records final out of the core, ``stats.finish`` the
one step after it, ``folder.split_to_folder`` from a source to a folder, errors of one
family worded for the library or for the command line."""
from __future__ import annotations

import ast
import gzip
import json
import pickle
from pathlib import Path

import pytest

import stream_split
from stream_split import errors
from stream_split.cli import main
from stream_split.config import SplitConfig
from stream_split.core import IterationRecord, Splitter, SplitOptions
from stream_split.folder import split_to_folder
from stream_split.read import TraceReader
from stream_split.stats import finish
from test_results import S1_LIKE, step_trace

PACKAGE = Path(stream_split.__file__).parent


def _events(trace) -> list:
    with TraceReader(str(trace)) as reader:
        return list(reader)


def _split_directly(events, **close) -> list:
    splitter = Splitter(SplitOptions(keep_events=False))
    for event in events:
        splitter.feed(event)
    splitter.close(**close)
    return splitter.iterations


def test_a_direct_caller_of_the_core_learns_that_the_input_was_cut_short(tmp_path):
    events = _events(step_trace(tmp_path / "t.json.gz", S1_LIKE))
    assert all(r.complete for r in _split_directly(events))
    cut = _split_directly(events, complete=False)
    assert cut and not any(r.complete for r in cut)


def test_finish_flags_the_outliers_the_cli_manifest_has(tmp_path):
    trace = step_trace(tmp_path / "t.json.gz", S1_LIKE)
    records = _split_directly(_events(trace))
    assert not any(r.outlier for r in records)  # the core cannot know them
    stats = finish(records)
    assert main(["split", str(trace), "-o", str(tmp_path / "out"), "-q"]) == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    # the manifest adds what the pieces show after the ratio (analysis.explain_outliers)
    assert [(r.outlier, r.outlier_reason) for r in records] == [
        (it["outlier"], it["outlier_reason"] and it["outlier_reason"].split(", ")[0])
        for it in manifest["iterations"]]
    assert any(r.outlier for r in records)
    assert stats.steady_state == manifest["steady_state"]


def test_boundaries_records_of_a_truncated_trace_are_not_complete(tmp_path, capsys):
    data = gzip.decompress(step_trace(tmp_path / "t.json.gz", S1_LIKE).read_bytes())
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) * 2 // 3])
    main(["boundaries", str(cut), "-q"])
    iterations = [json.loads(line) for line in capsys.readouterr().out.splitlines()
                  if json.loads(line)["type"] == "iteration"]
    assert iterations and not any(it["complete"] for it in iterations)


def _folder(path: Path) -> dict:
    return {p.name: gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
            for p in sorted(path.iterdir())}


def test_the_cli_the_library_and_split_to_folder_write_the_same_folder(tmp_path):
    trace = str(step_trace(tmp_path / "t.json.gz", S1_LIKE))
    assert main(["split", trace, "-o", str(tmp_path / "cli"), "-q", "--iterations", "1-4",
                 "--name-by", "step"]) == 0
    stream_split.split(trace, tmp_path / "library", iterations="1-4", name_by="step")
    config = SplitConfig.from_keywords(iterations="1-4", name_by="step")
    result = split_to_folder(trace, str(tmp_path / "direct"), config)
    assert result.opened and result.error is None and result.header is not None
    cli = _folder(tmp_path / "cli")
    assert "step_00003.json.gz" in cli and "step_00002.json.gz" not in cli
    assert _folder(tmp_path / "library") == cli == _folder(tmp_path / "direct")


def test_in_place_writes_into_the_callers_folder_and_reports_an_unreadable_input(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    (tmp_path / "into").mkdir()
    result = split_to_folder(str(bad), str(tmp_path / "into"), SplitConfig(), in_place=True)
    assert not result.opened and result.error and not result.manifest["complete"]


def _calls_and_names(module: str) -> set:
    tree = ast.parse((PACKAGE / module).read_text())
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}


@pytest.mark.parametrize("module", ["cli.py", "library.py", "ranks.py", "beam.py"])
def test_every_front_end_writes_a_folder_through_split_to_folder(module):
    names = _calls_and_names(module)
    assert "split_to_folder" in names
    assert not names & {"PieceWriter", "finish_split", "drive", "TraceReader"}


def test_every_error_class_derives_from_one_base():
    classes = [getattr(errors, name) for name in errors.__all__
               if isinstance(getattr(errors, name), type)
               and issubclass(getattr(errors, name), Exception)
               and not issubclass(getattr(errors, name), Warning)]
    assert len(classes) >= 8
    assert all(issubclass(c, errors.StreamSplitError) for c in classes)
    assert issubclass(errors.OptionError, ValueError)  # what callers caught before
    defined = {node.name for path in PACKAGE.rglob("*.py") if "testing" not in path.parts
               for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.ClassDef) and node.name.endswith(("Error", "Exception"))}
    assert defined <= set(errors.__all__) | {"StreamSplitError"}


def test_an_error_says_an_option_in_the_readers_words_also_across_processes():
    error = errors.OptionHadNoEffect.worded(
        lambda spell: f"{spell('iterations', '0,3')} matches nothing; try {spell('overwrite')}")
    assert str(error) == "iterations='0,3' matches nothing; try overwrite=True"
    assert error.cli_message == "--iterations 0,3 matches nothing; try --overwrite"
    copy = pickle.loads(pickle.dumps(error))  # a rank worker's error reaches the CLI
    assert (str(copy), copy.cli_message) == (str(error), error.cli_message)


def test_the_cli_prints_flags_where_the_library_says_keywords(tmp_path, capsys):
    trace = str(step_trace(tmp_path / "t.json.gz", S1_LIKE))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("x")
    assert main(["split", trace, "-o", str(tmp_path / "out"), "-q"]) == 2
    assert capsys.readouterr().err.endswith(
        "(--overwrite replaces an earlier output of stream-split)\n")
    plain = str(step_trace(tmp_path / "p.json.gz", [1000] * 5, annotated=False))
    assert main(["split", plain, "-o", str(tmp_path / "o2"), "--detector", "steps"]) == 2
    assert "use --detector auto to find" in capsys.readouterr().err


def test_records_leaving_the_library_are_iteration_records(tmp_path):
    trace = step_trace(tmp_path / "t.json.gz", S1_LIKE)
    records = list(stream_split.iterations(str(trace)))
    assert all(isinstance(r, IterationRecord) for r in records)
    assert [r.outlier for r in records] == [False, True, False, False, False, True]
