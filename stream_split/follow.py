"""Follow a trace file that is still being written (``--follow``): a growing-file chunk source.

``FollowedFile(path, idle_timeout=10.0)`` is a chunk source for ``read.TraceReader``:
``read(n, at_rest=None)`` returns the bytes the writer has added so far (at least one, at most
``n``, compressed as they are on disk: the one decoder undoes compression), waits when there
are none (``_wait_for_more``: woken by inotify where Linux allows, ``stream_split.watch``; else
polling every 20 ms, backing off to 200 ms), and returns ``b""`` (end of input) when

* the decoder is at rest (``at_rest``, the reason, is given by the reader: the JSON document is
  complete, or a compressed JSON Lines stream ended between members) and no byte is waiting;
  without this a finished trace would wait for the idle timeout;
* no new byte has arrived for ``idle_timeout`` seconds (JSON Lines, an unterminated array, a
  writer that died);
* ``stop()`` was called (from another thread, or from the CLI's SIGINT/SIGTERM handler through
  ``run.StopRequest``; the wait is short, after which it is seen);
* the file is no longer the one opened (``replaced`` says how: it shrank, its first bytes
  changed, or its name now leads to another file): the reader then marks the input incomplete
  with that reason, rather than mix two traces;
* for a pipe, its writer closed it.

A file renamed while it is read (Kineto writes ``<name>.tmp`` and renames it at the end) keeps
being read through the same open descriptor. A path that does not exist yet is waited for,
up to ``idle_timeout``; while waiting, ``<path>.tmp`` is taken if it appears first (Kineto's
file under its final name). ``-`` or a FIFO is read as a pipe: until its writer closes it.
"""
from __future__ import annotations

import os
import stat
import time

import stream_split
from stream_split.read import PipeWait, TraceInputError, enlarge_pipe, open_trace_file, stdin_fd

__all__ = ["DEFAULT_IDLE_TIMEOUT", "FollowedFile", "enlarge_pipe"]

#: Seconds without a new byte after which a followed file ends (``--idle-timeout``'s default
#: with ``--follow``).
DEFAULT_IDLE_TIMEOUT = 10.0
POLL_START = 0.02
POLL_MAX = 0.2
_RAW_CHUNK = 1 << 20


class FollowedFile:
    """A growing trace file as a chunk source (see the module docstring).

    Attributes: ``name``, ``idle_timeout``, ``end_reason`` (None while reading, then the
    ``at_rest`` reason given, "idle", "stopped", "pipe closed" or "replaced"), ``replaced``
    (why the file is no longer the trace, see ``_replaced_by``) and
    ``bytes_read`` (bytes read from the file)."""

    follows = True  # ``TraceReader`` passes ``at_rest`` to ``read``
    #: How many of the first bytes read are kept, to notice a file rewritten in place.
    HEAD_KEPT = 4096

    def __init__(self, path: str, *, idle_timeout: float = DEFAULT_IDLE_TIMEOUT, poll: float = POLL_START,
                 max_poll: float = POLL_MAX):
        self.name = str(path)
        self.idle_timeout = float(idle_timeout)
        self._poll = poll
        self._max_poll = max(max_poll, poll)
        self.end_reason: str | None = None
        self.bytes_read = 0
        self._stopped = False
        self._eof = False
        self._last_input = time.monotonic()
        self._closefd = True
        self.replaced: str | None = None
        self._head = b""  # the first bytes read (``HEAD_KEPT``)
        self._opened_as = self.name
        self._fd, self._pipe = self._open(self.name)
        info = os.fstat(self._fd)
        self._identity = (info.st_dev, info.st_ino)
        self._pipe_wait = PipeWait(self._fd)

    # -- opening -------------------------------------------------------------------------------

    def _open(self, path: str) -> tuple[int, bool]:
        if path == "-":
            fd = stdin_fd()
            self._closefd = False
            enlarge_pipe(fd)
            return fd, not stat.S_ISREG(os.fstat(fd).st_mode)
        deadline = time.monotonic() + self.idle_timeout
        delay = self._poll
        while True:
            for candidate in (path, path + ".tmp"):
                # A FIFO opens without waiting for its writer (reads wait in PipeWait, where
                # a stop request is seen).
                fd = open_trace_file(candidate, missing_ok=True)
                if fd is None:
                    continue
                pipe = stat.S_ISFIFO(os.fstat(fd).st_mode)
                if pipe:
                    enlarge_pipe(fd)
                self._opened_as = candidate
                return fd, pipe
            if self._stopped or time.monotonic() >= deadline:
                raise TraceInputError(
                    f"no such file: {path} (waited {self.idle_timeout:g} s for it to appear)")
            time.sleep(delay)
            delay = min(delay * 1.5, self._max_poll)

    # -- the chunk source ----------------------------------------------------------------------

    def stop(self) -> None:
        """Make the next (or the waiting) ``read`` return ``b""``; callable from any thread."""
        self._stopped = True

    def read(self, n: int = _RAW_CHUNK, *, at_rest: str | None = None) -> bytes:
        """The bytes added since the last read (at most ``n``), waiting for some; ``b""`` at
        the end (see the module docstring). ``at_rest``: the reader's reason to stop now
        when nothing more is there."""
        if n is None or n < 0:
            n = _RAW_CHUNK
        if n == 0 or self._eof:
            return b""
        started = time.monotonic()
        waited = 0
        while True:
            if self._stopped:
                return self._end("stopped")
            self.replaced = self._replaced_by()
            if self.replaced:
                return self._end("replaced")
            data = self._read_now(n)
            if data:
                return data
            if self._eof:  # a closed pipe
                return b""
            if at_rest is not None:
                return self._end(at_rest)
            if time.monotonic() - max(started, self._last_input) >= self.idle_timeout:
                return self._end("idle")
            self._wait_for_more(waited)
            waited += 1

    def _wait_for_more(self, waited: int) -> None:
        """Wait a little for the writer (the ``waited``-th wait of this read): until inotify
        says the file changed (``watch.wait_for_growth``), at most ``poll`` seconds backing off
        to ``max_poll``; a plain sleep of that long where inotify is unavailable."""
        # inotify (ctypes, and subprocess through ctypes.util): loaded only when followed
        stream_split.watch.wait_for_growth(self, min(self._poll * 1.5 ** waited, self._max_poll))

    def fileno(self) -> int:
        """The open file (``watch.wait_for_growth`` watches it)."""
        return self._fd

    def close(self) -> None:
        if self._fd >= 0 and self._closefd:
            os.close(self._fd)
        self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------------------

    def _end(self, reason: str) -> bytes:
        self._eof = True
        self.end_reason = self.end_reason or reason
        return b""

    def _read_now(self, n: int) -> bytes:
        idle_left = self.idle_timeout - (time.monotonic() - self._last_input)
        if not self._pipe_wait.ready(lambda: self._stopped, max(0.0, idle_left)):
            return b""  # stopped, or a silent pipe: ``read`` ends the stream
        try:
            data = os.read(self._fd, n)
        except BlockingIOError:  # a FIFO opened O_NONBLOCK: nothing yet after all
            return b""
        except OSError as e:
            raise TraceInputError(f"cannot read {self.name}: {e.strerror}") from None
        if data:
            if len(self._head) < self.HEAD_KEPT and not self._pipe:
                self._head += data[:self.HEAD_KEPT - len(self._head)]
            self.bytes_read += len(data)
            self._last_input = time.monotonic()
        elif self._pipe:
            self._end("pipe closed")
        return data

    def _replaced_by(self) -> str | None:
        """How the file stopped being the trace read so far, or None: it shrank (truncated),
        its first bytes changed (rewritten in place), or its name leads to another file
        (replaced; a rename of Kineto's ``.tmp`` to the final name is the same file)."""
        if self._pipe:
            return None
        try:
            size = os.fstat(self._fd).st_size
            head = os.pread(self._fd, len(self._head), 0) if self._head else b""
        except OSError:
            return None
        if size < self.bytes_read:
            return f"the followed file shrank to {size} bytes after {self.bytes_read} were read"
        if head != self._head:
            return "the followed file was rewritten: its first bytes changed"
        names = [self._opened_as, self.name]
        found = [_identity(name) for name in names]
        if self._identity not in found and any(found):
            return "the followed file was replaced by another file of the same name"
        return None


def _identity(path: str):
    """(device, inode) of the file at ``path``, None when there is none."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return info.st_dev, info.st_ino
