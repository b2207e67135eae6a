"""Issue 22 item 7: whatever a pattern matches that cannot be read whole as a trace (a
directory, a dangling link, a link loop, a FIFO, a Unix socket, an unreadable file) is a dead
letter with its reason, and the job ends; a trace that outruns ``time_budget`` is one too."""
from __future__ import annotations

import gzip
import os
import socket

import pytest

beam = pytest.importorskip("apache_beam")

from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline  # noqa: E402
from apache_beam.testing.util import assert_that  # noqa: E402

from stream_split.beam import SplitTraces, file_problem  # noqa: E402
from stream_split.core import SplitOptions  # noqa: E402
from stream_split.testing.generate import generate, render  # noqa: E402

pytestmark = pytest.mark.beam


@pytest.fixture
def odd_archive(tmp_path):
    """A good trace beside every kind of path that is no readable trace file."""
    root = tmp_path / "archive"
    root.mkdir()
    (root / "good.json.gz").write_bytes(
        gzip.compress(render(generate("training", 0, steps=4), "object").encode()))
    (root / "adir.json.gz").mkdir()
    os.symlink("nowhere", root / "dangling.json.gz")
    os.symlink("loop2.json.gz", root / "loop1.json.gz")
    os.symlink("loop1.json.gz", root / "loop2.json.gz")
    os.mkfifo(root / "fifo.json.gz")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "socket.json.gz"))
    yield root
    server.close()


def test_every_path_that_is_no_trace_file_is_a_dead_letter_and_the_job_ends(odd_archive):
    want = {"adir.json.gz": "a directory", "dangling.json.gz": "a dangling symbolic link",
            "loop1.json.gz": "a symbolic link loop", "loop2.json.gz": "a symbolic link loop",
            "fifo.json.gz": "a FIFO", "socket.json.gz": "a Unix socket"}

    def check_dead_letters(letters):
        got = {os.path.basename(row["trace"]): row["error"] for row in letters}
        assert sorted(got) == sorted(want)
        for name, reason in want.items():
            assert got[name].startswith(reason), (name, got[name])

    def check_records(records):
        assert {os.path.basename(r["trace"]) for r in records} == {"good.json.gz"}
        assert len(records) == 4

    with BeamTestPipeline() as p:
        out = p | beam.Create([str(odd_archive / "*.json.gz")]) | SplitTraces(
            SplitOptions(detector="steps"))
        assert_that(out.dead_letters, check_dead_letters, label="dead")
        assert_that(out.iterations, check_records, label="records")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file without read permission")
def test_an_unreadable_file_is_named_as_such(tmp_path):
    path = tmp_path / "locked.json"
    path.write_bytes(b"{}")
    path.chmod(0)
    assert file_problem(str(path)) == "permission denied"


def test_a_trace_past_its_time_budget_is_a_dead_letter(long_trace):
    def check_dead_letters(letters):
        assert [row["error"] for row in letters] == [
            "took longer than its time budget of 0.05 s"]

    with BeamTestPipeline() as p:
        out = p | beam.Create([str(long_trace)]) | SplitTraces(time_budget=0.05)
        assert_that(out.dead_letters, check_dead_letters, label="dead")


def test_a_time_budget_must_be_positive_seconds():
    with pytest.raises(ValueError, match="time_budget"):
        SplitTraces(time_budget=0)
