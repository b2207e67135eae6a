"""``summary`` and ``plot`` on a damaged or hand-edited split folder, and ``plot`` into a path
it cannot write (issue 22): one line ``stream-split: error: ...``, exit status 2, never a
traceback, never a success that wrote nothing."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import one_error_line, run_cli

VALID_RANKS = {"ranks": [{"rank": 0}, {"rank": 1}], "aligned_by": "step", "stragglers": 0,
               "straggler_ratio": 1.2, "counts_agree": True, "counts": {"0": 1, "1": 1},
               "iterations": [{"k": 0, "step": 3, "duration_us": {"0": 1000.0, "1": 1100},
                               "missing_ranks": [], "slowest_rank": 1, "spread_us": 100.0,
                               "spread_ratio": 1.1, "straggler": None}]}


@pytest.fixture(scope="module")
def split_folder(small_trace, tmp_path_factory):
    out = tmp_path_factory.mktemp("damaged") / "split"
    run_cli("split", small_trace, "-q", "-o", out)
    return out


def _edited_copy(split_folder, tmp_path, edit):
    folder = tmp_path / "edited"
    shutil.copytree(split_folder, folder)
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    text = edit(manifest)
    path.write_text(text if isinstance(text, str) else json.dumps(manifest))
    return folder


def _set(path: list, value):
    def edit(manifest):
        target = manifest
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return edit


MANIFEST_EDITS = {
    "iterations an object": (_set(["iterations"], {"0": {}}), "iterations"),
    "a start_ts as text": (_set(["iterations", 1, "start_ts"], "12"), "iterations[1].start_ts"),
    "an index as true": (_set(["iterations", 0, "index"], True), "iterations[0].index"),
    "an iteration a list": (_set(["iterations", 2], [1, 2]), "iterations[2]"),
    "no duration": (lambda m: m["iterations"][0].pop("duration_us") and None, "duration_us"),
    "a cpu_ops as text": (_set(["iterations", 0, "cpu_ops"], "5"), "iterations[0].cpu_ops"),
    "a steady state as text": (_set(["steady_state", "first"], "0"), "steady_state.first"),
    "the manifest a list": (lambda m: "[1, 2]", "not an object"),
    "cut JSON": (lambda m: '{"iterations": [', "manifest.json"),
    "nested too deeply": (lambda m: "[" * 100_000 + "]" * 100_000, "nested too deeply"),
}


@pytest.mark.parametrize("case", sorted(MANIFEST_EDITS))
@pytest.mark.parametrize("command", ["summary", "plot"])
def test_a_hand_edited_manifest_is_one_line_naming_the_field(split_folder, tmp_path, case,
                                                              command):
    edit, named = MANIFEST_EDITS[case]
    folder = _edited_copy(split_folder, tmp_path, edit)
    out = ["-o", tmp_path / "p.png"] if command == "plot" else []
    done = run_cli(command, folder, *out, check=False)
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert "not a stream-split manifest" in line and named in line
    assert not (tmp_path / "p.png").exists()


def test_an_unedited_manifest_passes_the_check(split_folder):
    done = run_cli("summary", split_folder, "--json")
    assert len(json.loads(done.stdout)["rows"]) == 6


RANKS_EDITS = {
    "not JSON": ("{\"ranks\": [", "ranks.json"),
    "no ranks": ({k: v for k, v in VALID_RANKS.items() if k != "ranks"}, "'ranks'"),
    "a duration as text": ({**VALID_RANKS, "iterations": [
        {**VALID_RANKS["iterations"][0], "duration_us": {"0": "1000"}}]}, "duration_us"),
    "a row a string": ({**VALID_RANKS, "iterations": ["k0"]}, "iterations[0]"),
    "counts a list": ({**VALID_RANKS, "counts": [1, 1]}, "counts"),
}


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
@pytest.mark.parametrize("case", sorted(RANKS_EDITS))
def test_a_broken_ranks_json_is_one_line(tmp_path, case, json_flag):
    document, named = RANKS_EDITS[case]
    text = document if isinstance(document, str) else json.dumps(document)
    (tmp_path / "ranks.json").write_text(text)
    done = run_cli("summary", tmp_path, *json_flag, check=False)
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert "not a stream-split ranks.json" in line and named in line


def test_a_well_formed_ranks_json_is_drawn(tmp_path):
    (tmp_path / "ranks.json").write_text(json.dumps(VALID_RANKS))
    done = run_cli("summary", tmp_path)
    assert "2 ranks, aligned by step" in done.stdout.decode()


@pytest.mark.parametrize("name", ["picture.xyz", "picture", "picture.png.bak"])
def test_an_unknown_picture_suffix_names_the_ones_that_work(split_folder, tmp_path, name):
    done = run_cli("plot", split_folder, "-o", tmp_path / name, check=False)
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert ".png" in line and ".svg" in line and ".html" in line
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("where", ["a folder", "a full device"])
def test_a_picture_that_cannot_be_written_is_an_error(split_folder, tmp_path, where):
    pytest.importorskip("matplotlib")
    target = tmp_path / "picture.png"
    if where == "a folder":
        target.mkdir()
    else:
        target.symlink_to("/dev/full")
    done = run_cli("plot", split_folder, "-o", target, check=False)
    assert done.returncode == 2
    assert f"cannot write the picture {target}" in one_error_line(done.stderr)
    assert sorted(os.listdir(tmp_path)) == ["picture.png"]
