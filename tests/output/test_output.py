"""stream_split.output: output folders as transactions. A split is written into a private
staging folder and moved onto its target whole; one writer per target; links are never
followed; leftovers of a crash go at the next run. Real folders, no CLI."""
import os
import stat
import subprocess
import sys

import pytest

from stream_split.output import OutputError, OutputFolder, create_new, foreign_entries


def write_result(folder: OutputFolder, **files) -> None:
    for name, text in files.items():
        with create_new(os.path.join(folder.staging, name), "w") as f:
            f.write(text)


def split_into(target, overwrite=False, **files) -> None:
    with OutputFolder(str(target), overwrite=overwrite) as folder:
        write_result(folder, **files)
        folder.commit()


def entries(path) -> list:
    """The files written into a folder (the hidden ones it keeps for itself aside)."""
    return sorted(p for p in os.listdir(path) if not p.startswith("."))


def beside(target) -> list:
    """What the parent of ``target`` holds besides it and a lock file."""
    name = os.path.basename(target)
    return sorted(p for p in os.listdir(os.path.dirname(target))
                  if p != name and not p.endswith(".lock"))


def test_a_committed_folder_is_the_target_with_what_was_written(tmp_path):
    split_into(tmp_path / "out", **{"manifest.json": "{}", "piece": "p"})
    assert entries(tmp_path / "out") == ["manifest.json", "piece"]
    assert (tmp_path / "out" / "piece").read_text() == "p"


def test_the_parent_folders_of_the_target_are_made(tmp_path):
    split_into(tmp_path / "a" / "b" / "out", piece="p")
    assert entries(tmp_path / "a" / "b" / "out") == ["piece"]


def test_until_commit_the_target_does_not_exist_and_the_staging_folder_is_private(tmp_path):
    with OutputFolder(str(tmp_path / "out")) as folder:
        write_result(folder, piece="p")
        assert not (tmp_path / "out").exists()
        assert os.path.dirname(folder.staging) == str(tmp_path)  # one rename away
        assert stat.S_IMODE(os.stat(folder.staging).st_mode) == 0o700
        folder.commit()


def test_the_committed_folder_has_the_mode_the_umask_gives(tmp_path):
    old = os.umask(0o027)
    try:
        split_into(tmp_path / "out", piece="p")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "out").st_mode) == 0o750


def test_leaving_without_commit_discards_everything_and_keeps_the_old_result(tmp_path):
    split_into(tmp_path / "out", **{"manifest.json": "old"})
    with pytest.raises(RuntimeError):
        with OutputFolder(str(tmp_path / "out"), overwrite=True) as folder:
            write_result(folder, **{"manifest.json": "new", "piece": "half"})
            raise RuntimeError("the split failed")
    assert entries(tmp_path / "out") == ["manifest.json"]
    assert (tmp_path / "out" / "manifest.json").read_text() == "old"
    assert [p for p in os.listdir(tmp_path) if "staging" in p] == []


def test_overwrite_replaces_the_old_result_as_a_whole(tmp_path):
    split_into(tmp_path / "out", **{"manifest.json": "{}", "iteration_00000.json.gz": "a",
                                    "iteration_00001.json.gz": "b"})
    split_into(tmp_path / "out", overwrite=True, **{"manifest.json": "{}",
                                                    "iteration_00000.json.gz": "new"})
    assert entries(tmp_path / "out") == ["iteration_00000.json.gz", "manifest.json"]
    assert (tmp_path / "out" / "iteration_00000.json.gz").read_text() == "new"
    assert beside(tmp_path / "out") == [], "no replaced result left beside it"


def test_an_empty_target_folder_is_used_without_overwrite(tmp_path):
    (tmp_path / "out").mkdir()
    split_into(tmp_path / "out", piece="p")
    assert entries(tmp_path / "out") == ["piece"]


def test_a_non_empty_target_is_refused_without_overwrite(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("mine")
    with pytest.raises(OutputError, match="not empty"):
        with OutputFolder(str(tmp_path / "out")):
            pass
    assert entries(tmp_path / "out") == ["mine.txt"]


@pytest.mark.parametrize("target, message", [("", "empty path"), ("/", "root folder")])
def test_an_empty_path_or_the_root_is_refused(target, message):
    with pytest.raises(OutputError, match=message):
        OutputFolder(target)


def test_a_target_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "out").write_text("x")
    with pytest.raises(OutputError, match="not a folder"):
        with OutputFolder(str(tmp_path / "out")):
            pass
    assert (tmp_path / "out").read_text() == "x"


def test_a_parent_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError):
        with OutputFolder(str(tmp_path / "file" / "out")):
            pass


def test_a_target_that_is_a_link_is_refused_and_never_followed(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OutputError, match="symbolic link"):
        with OutputFolder(str(tmp_path / "out"), overwrite=True):
            pass
    assert entries(tmp_path / "elsewhere") == []


def test_a_second_writer_of_the_same_target_fails_at_once(tmp_path):
    with OutputFolder(str(tmp_path / "out")) as first:
        with pytest.raises(OutputError, match="another stream-split is writing"):
            with OutputFolder(str(tmp_path / "out")):
                pass
        write_result(first, piece="first")
        first.commit()
    assert (tmp_path / "out" / "piece").read_text() == "first"


def test_the_lock_is_released_when_the_block_is_left(tmp_path):
    with OutputFolder(str(tmp_path / "out")):
        pass
    split_into(tmp_path / "out", piece="p")  # would fail if the lock were still held


CRASH = """
import os, sys
from stream_split.output import OutputFolder, create_new
folder = OutputFolder(sys.argv[1]).__enter__()
with create_new(os.path.join(folder.staging, "piece")) as f:
    f.write(b"half")
os._exit(9)  # no clean-up runs, as after kill -9
"""


def test_the_staging_folder_of_a_crashed_run_is_removed_by_the_next_one(tmp_path):
    target = tmp_path / "out"
    done = subprocess.run([sys.executable, "-c", CRASH, str(target)], capture_output=True)
    assert done.returncode == 9, done.stderr
    assert beside(target), "the crash left its staging folder"
    split_into(target, piece="p")
    assert beside(target) == [] and entries(target) == ["piece"]


@pytest.mark.parametrize("name", [
    ".out.staging-abc",  # not mkdtemp's 8 characters
    ".out.staging-x.staging-abcd1234",  # the staging folder of the target "out.staging-x"
    ".outer.staging-abcd1234",  # another target
    ".out.staging-abcd1234.keep",
])
def test_folders_that_only_look_like_leftovers_are_left_alone(tmp_path, name):
    (tmp_path / name).mkdir()
    split_into(tmp_path / "out", piece="p")
    assert (tmp_path / name).is_dir()


def test_a_leftover_name_that_is_a_link_is_not_followed(tmp_path):
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "precious").write_text("x")
    (tmp_path / ".out.staging-abcd1234").symlink_to(tmp_path / "victim")
    split_into(tmp_path / "out", piece="p")
    assert (tmp_path / "victim" / "precious").read_text() == "x"


def test_create_new_refuses_a_file_that_exists(tmp_path):
    (tmp_path / "piece").write_text("old")
    with pytest.raises(FileExistsError):
        create_new(str(tmp_path / "piece"))
    assert (tmp_path / "piece").read_text() == "old"


def test_create_new_never_writes_through_a_link(tmp_path):
    (tmp_path / "victim").write_text("precious")
    (tmp_path / "piece").symlink_to(tmp_path / "victim")
    with pytest.raises(OSError):
        create_new(str(tmp_path / "piece"))
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(OSError):
        create_new(str(tmp_path / "dangling"))
    assert (tmp_path / "victim").read_text() == "precious"
    assert not (tmp_path / "nowhere").exists()


def test_create_new_opens_in_the_mode_asked(tmp_path):
    with create_new(str(tmp_path / "text"), "w", encoding="utf-8") as f:
        f.write("\u00e9")
    assert (tmp_path / "text").read_bytes() == b"\xc3\xa9"


def test_foreign_entries_names_all_the_folder_holds_that_its_marker_does_not_list(tmp_path):
    """What ``--overwrite`` refuses to delete, looked at through the folder's own listing:
    a file not listed (top or nested), a listed name that is no longer a regular file (a
    folder, a FIFO, a link), a folder not on the way to a listed file (not looked into)."""
    target = tmp_path / "out"
    with OutputFolder(str(target)) as folder:
        for name in ("manifest.json", "a.json.gz", "b.json.gz", "c.json.gz", "d.json.gz"):
            write_result(folder, **{name: "x"})
        os.mkdir(os.path.join(folder.staging, "rank_0"))
        for name in ("rank_0/p.json.gz", "rank_0/q.json.gz"):
            with create_new(os.path.join(folder.staging, name), "w") as f:
                f.write("y")
        folder.commit()
    os.unlink(target / "b.json.gz")
    os.mkdir(target / "b.json.gz")
    os.unlink(target / "c.json.gz")
    os.mkfifo(target / "c.json.gz")
    os.unlink(target / "d.json.gz")
    os.symlink(target / "a.json.gz", target / "d.json.gz")
    (target / "notes.txt").write_text("mine")
    (target / "rank_0" / "mine.txt").write_text("mine")
    os.makedirs(target / "keep" / "deep")
    (target / "keep" / "deep" / "x").write_text("mine")
    assert foreign_entries(str(target)) == [
        "b.json.gz/", "c.json.gz", "d.json.gz", "keep/", "notes.txt", "rank_0/mine.txt"]
    with pytest.raises(OutputError, match="did not write"):
        split_into(target, overwrite=True, **{"manifest.json": "{}"})
    for name in ("notes.txt", "rank_0/mine.txt", "keep/deep/x", "a.json.gz"):
        assert (target / name).exists()
