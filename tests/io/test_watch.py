"""Following a growing file wakes on new bytes (inotify on Linux), not at the next poll."""
import os
import threading
import time

import pytest

from stream_split.watch import _watches, inotify_available, wait_for_growth


class _Source:
    def __init__(self, fd):
        self.fd = fd

    def fileno(self):
        return self.fd


@pytest.mark.skipif(not inotify_available(), reason="no inotify on this system")
def test_a_write_wakes_the_waiting_reader_long_before_its_timeout(tmp_path):
    path = tmp_path / "growing.jsonl"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDONLY)
    source = _Source(fd)
    try:
        wait_for_growth(source, 0)  # the watch exists before the writer writes
        writer = threading.Timer(0.2, lambda: path.open("ab").write(b"{}\n"))
        writer.start()
        began = time.monotonic()
        wait_for_growth(source, 60)
        waited = time.monotonic() - began
        writer.join()
        assert waited < 30  # woken by the write, not by the 60 s timeout
        assert os.read(fd, 100) == b"{}\n"
    finally:
        os.close(fd)


def test_a_pipe_is_not_watched_and_the_wait_is_a_plain_sleep():
    r, w = os.pipe()
    source = _Source(r)
    try:
        wait_for_growth(source, 0)
        assert _watches[source].fd < 0
    finally:
        os.close(r)
        os.close(w)
