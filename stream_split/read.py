"""Read stage: chunk sources feeding the one ``TraceDecoder``, never holding the whole file.

What this module owns:
- opening a source (a path, ``-`` for stdin, a binary stream such as Beam's, or a growing file
  from ``stream_split.follow``) as a *chunk source*: ``read(n)`` returns the bytes available
  (at least one, ``b""`` at the end);
- ``TraceReader``: pulls chunks from a source into ``stream_split.decode.TraceDecoder`` (which
  alone detects compression and the form, frames and parses the events and keeps the header
  keys) and hands out its batches of events with their original bytes;
- ``open_trace_file``: a path opened as a trace, its errors in one line naming it (also for
  ``follow``).

Waiting for bytes: a pipe, a FIFO or a terminal is polled (``_Source``), so a stop requested
by a signal (``run.StopRequest``) ends a read that would block forever (``ReadInterrupted``);
a FIFO is opened without waiting for its writer.
It never decides anything about iterations.
"""
from __future__ import annotations

import fcntl
import io
import os
import select
import stat
import sys
import time
from typing import BinaryIO, Iterator

from stream_split.decode import MAX_DEPTH, MAX_EVENT_BYTES, Events, TraceDecoder
from stream_split.errors import ReadInterrupted, TraceInputError

__all__ = ["TraceReader", "TraceInputError", "ReadInterrupted", "MAX_DEPTH", "CHUNK",
           "open_source", "open_trace_file", "enlarge_pipe", "stdin_fd"]

#: Bytes asked of a source per read (a pipe returns what it holds); a compressed input is read
#: in pieces a sixteenth of that (about as many bytes of JSON, ~2 000 events, per batch: the
#: events of one batch are all in memory at once).
CHUNK = 512 * 1024
_COMPRESSED_SHARE = 16
#: Bytes of the first read, doubled at each read until the first event has come: the events
#: decoded while opening are parsed in full (whether the consumer wants them slim is told
#: later, ``batches``), so they are few; the doubling keeps a long header few reads.
FIRST_CHUNK = 32 * 1024
#: How long one wait for a pipe lasts before a stop request is looked at again (seconds).
_POLL_INTERVAL = 0.1

PIPE_SIZE = 1 << 20
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ (Linux), absent from older fcntl modules


def enlarge_pipe(fd: int, size: int = PIPE_SIZE) -> int | None:
    """Ask for a ``size``-byte buffer if ``fd`` is a pipe (Linux): fewer wake-ups for both ends
    of ``zcat t.json.gz | stream-split ...``. Returns the new size or None.

    Failures (not a pipe, not Linux, above ``/proc/sys/fs/pipe-max-size`` for an unprivileged
    user) are ignored: a bigger buffer is only an optimisation."""
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return None
        return fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", _F_SETPIPE_SZ), size)
    except (OSError, ValueError):
        return None


def open_source(source: str | BinaryIO, stop=None,
                idle_timeout: float | None = None) -> tuple[BinaryIO, str]:
    """Open a path, ``-`` (stdin) or a binary stream; returns (stream, display name).

    ``stop`` (a ``run.StopRequest``) ends a wait for a pipe's bytes; so does
    ``idle_timeout`` seconds without a byte from a pipe or FIFO (``_Source.idle``). A stream
    passed in is the caller's: its errors are the caller's too (Beam retries a storage
    error)."""
    if hasattr(source, "read"):
        return source, getattr(source, "name", "<stream>")
    if source == "-":
        fd = stdin_fd()
        enlarge_pipe(fd)
        # Unbuffered: read(n) returns what the pipe holds now instead of waiting for n bytes,
        # so a live writer's events are parsed as they come.
        return _Source(fd, "<stdin>", stop, owned=False, idle_timeout=idle_timeout), "<stdin>"
    fd = open_trace_file(source)
    return _Source(fd, str(source), stop, owned=True, idle_timeout=idle_timeout), str(source)


def stdin_fd() -> int:
    """The file descriptor of stdin; a ``TraceInputError`` when the process has none
    (started with ``<&-``)."""
    if sys.stdin is None:
        raise TraceInputError("stdin is closed: there is no trace to read from -")
    return sys.stdin.fileno()


def open_trace_file(path, *, missing_ok: bool = False) -> int | None:
    """A file descriptor of the trace at ``path``, opened without waiting for a FIFO's
    writer (``O_NONBLOCK``: the reads are polled); None when it does not exist and
    ``missing_ok``. Every other failure, a folder included, is a ``TraceInputError`` whose
    one line names the path: the one place that says why a trace cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        if missing_ok:
            return None
        raise TraceInputError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise TraceInputError(f"is a directory, not a trace: {path}") from None
    except PermissionError:
        raise TraceInputError(f"permission denied: {path}") from None
    except NotADirectoryError:
        raise TraceInputError(f"a part of the path is not a folder: {path}") from None
    except (OSError, ValueError) as e:  # a link loop, a name too long, a NUL in the name...
        raise TraceInputError(f"cannot open {path}: {getattr(e, 'strerror', None) or e}") \
            from None
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.close(fd)
        raise TraceInputError(f"is a directory, not a trace: {path}")
    return fd


class PipeWait:
    """Waits until a pipe, FIFO or terminal has bytes (or its writer is gone), looking every
    ``_POLL_INTERVAL`` at ``stopped()``: a signal handler only sets a flag (``StopRequest``),
    and a plain blocking read would not return for it. Regular files never wait."""

    def __init__(self, fd: int):
        self._poll = None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            self._poll = select.poll()
            self._poll.register(fd, select.POLLIN)

    def ready(self, stopped, timeout: float | None = None) -> bool:
        """True once a read will not block; False if ``stopped()`` came first, or
        ``timeout`` seconds passed (a silent pipe, a FIFO that no writer opened)."""
        if self._poll is None:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        while not stopped():
            wait = _POLL_INTERVAL if deadline is None else \
                min(_POLL_INTERVAL, max(0.0, deadline - time.monotonic()))
            if self._poll.poll(wait * 1000):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
        return False


class _Source(io.RawIOBase):
    """A file descriptor as a raw stream: a pipe, FIFO or terminal is waited on with
    ``PipeWait``, so that a stop request ends the wait (``ReadInterrupted``), and so does
    ``idle_timeout`` seconds without a byte (the end of the input, cut short: ``idle`` then
    says why); a read error is the input's (one line), not a traceback."""

    def __init__(self, fd: int, name: str, stop, *, owned: bool,
                 idle_timeout: float | None = None):
        self._fd = fd
        self.name = name
        self._stopped = (lambda: stop.requested) if stop is not None else (lambda: False)
        self._owned = owned
        self._wait = PipeWait(fd)
        self._idle_timeout = idle_timeout
        #: Why the input ended before its writer closed it (no byte for ``idle_timeout``
        #: seconds), or None.
        self.idle: str | None = None

    def readable(self):
        return True

    def fileno(self) -> int:
        return self._fd

    def read(self, n=-1):
        if n is None or n < 0:
            n = CHUNK
        while True:
            if self.idle:
                return b""
            if not self._wait.ready(self._stopped, self._idle_timeout):
                if self._stopped():
                    raise ReadInterrupted()
                self.idle = f"no new byte for {self._idle_timeout:g} s (--idle-timeout)"
                return b""
            try:
                return os.read(self._fd, n)
            except BlockingIOError:  # a FIFO opened O_NONBLOCK: nothing yet after all
                continue
            except OSError as e:
                raise TraceInputError(f"cannot read {self.name}: {e.strerror}") from None

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self):
        if self._owned and self._fd >= 0:
            os.close(self._fd)
        self._fd = -1
        super().close()



class TraceReader:
    """Incremental reader of one trace: a chunk source feeding a ``TraceDecoder``.

    Iterate it for events (dicts, in file order), or ``batches()`` for ``Events`` batches
    (events with their original bytes). During and after reading: ``form``, ``compression``,
    ``header_before``, ``header_after``, ``complete``, ``stop_reason``, ``bytes_read`` (bytes
    of JSON text decoded) and ``input_bytes`` (bytes taken from the source so far: compressed
    bytes when the input is compressed; a progress bar's numerator; ``input_size`` its
    denominator). A context manager:
    ``close()`` (idempotent) closes what it opened, never a stream it was given.

    A source with ``follows = True`` (``follow.FollowedFile``) is told when the decoder is at
    rest (the document is complete), so that it stops waiting for more bytes."""

    def __init__(self, source: str | BinaryIO, *, name: str | None = None, stop=None,
                 chunk_size: int = CHUNK, max_event_bytes: int = MAX_EVENT_BYTES,
                 idle_timeout: float | None = None):
        raw, display = open_source(source, stop, idle_timeout)
        self._source = raw
        self._owned = isinstance(raw, _Source) or hasattr(raw, "follows")
        self.name = name or display
        self.decoder = TraceDecoder(max_event_bytes=max_event_bytes)
        #: Why the input ended before its end: a followed file replaced, a pipe idle.
        self._cut_short: str | None = None
        self._chunk = chunk_size
        self._started = False  # the first event has come (``_until_first_event``)
        self._first_chunk = FIRST_CHUNK
        try:
            self._pending = self._until_first_event()
        except BaseException:
            self.close()
            raise

    # The decoder's view, as attributes of the reader.
    form = property(lambda self: self.decoder.form)
    compression = property(lambda self: self.decoder.compression)
    header_before = property(lambda self: self.decoder.header_before)
    header_after = property(lambda self: self.decoder.header_after)
    # A followed file that was replaced (``follow.FollowedFile.replaced``), or a pipe cut
    # short by the idle timeout (``_Source.idle``), is incomplete, whatever the decoder saw:
    # the rest of the trace is not in it.
    complete = property(lambda self: self.decoder.complete and self._cut_short is None)
    stop_reason = property(lambda self: self._cut_short or self.decoder.stop_reason)
    bytes_read = property(lambda self: self.decoder.bytes_decoded)
    input_bytes = property(lambda self: self.decoder.bytes_in)

    @property
    def input_size(self) -> int | None:
        """The source's size in bytes when it is a regular file (a progress bar's total),
        else None (a pipe, a stream without a file)."""
        try:
            info = os.fstat(self._source.fileno())
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
            return None
        return info.st_size if stat.S_ISREG(info.st_mode) else None

    @property
    def live(self) -> bool:
        """Whether events may arrive while the run goes on (a pipe, a FIFO, a followed file):
        what it has read is handed to the engine at once, never held for more to come."""
        return hasattr(self._source, "follows") or self.input_size is None

    def close(self) -> None:
        if self._source is not None and self._owned:
            self._source.close()
        self._source = None

    def __enter__(self) -> "TraceReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read_chunk(self) -> bytes:
        source = self._source
        if source is None:
            return b""
        if getattr(source, "follows", False):
            decoder = self.decoder
            rest = None
            if decoder.at_rest:
                rest = "stream end" if decoder.form == "jsonl" else "document"
            data = source.read(self._chunk_size(), at_rest=rest)
            if not data and source.replaced:  # the followed file is another one now
                self._cut_short = source.replaced
            return data
        try:
            data = source.read(self._chunk_size())
            self._cut_short = getattr(source, "idle", None)
            return data
        except TraceInputError:
            raise
        except OSError as e:
            raise TraceInputError(f"cannot read {self.name}: {e.strerror or e}") from None

    def _chunk_size(self) -> int:
        chunk = self._chunk
        if not self._started:  # opening: small reads, doubled (``FIRST_CHUNK``)
            chunk = min(chunk, self._first_chunk)
            self._first_chunk *= 2
        if self.decoder.compression == "plain":
            return chunk
        return max(1, chunk // _COMPRESSED_SHARE)  # compressed, or not known yet

    def _until_first_event(self) -> Events:
        """Read until the first event (or the end): errors such as "empty input", "not JSON"
        or "not a trace" come at once, as opening does, so that a caller (``split``) creates
        nothing for an input that is none; returns the events decoded on the way."""
        decoder = self.decoder
        pending = Events()
        try:
            while not pending.events and not decoder.ended:
                pending.extend(self._next_batch())
        except TraceInputError:
            if self._cut_short and not decoder.bytes_in:  # a pipe silent from the start
                raise TraceInputError(f"{self._cut_short}: nothing came on {self.name}") \
                    from None
            raise
        self._started = True
        return pending

    def _next_batch(self) -> Events:
        """The decoder's next batch: the rest of a chunk that expanded to much (its
        ``backlog``), else the next chunk's."""
        decoder = self.decoder
        if decoder.backlog:
            return decoder.receive_more()
        return decoder.receive_data(self._read_chunk())

    def batches(self, raws: bool = True, slim: bool = False) -> Iterator[Events]:
        """Batches of events, as the source's bytes come (one per chunk that completes any);
        ``raws=False``: without the events' original bytes (``TraceDecoder.keep_raws``);
        ``slim=True``: for the engine alone (``TraceDecoder.slim`` and ``lazy_dims``)."""
        decoder = self.decoder
        decoder.keep_raws = raws
        decoder.slim = decoder.lazy_dims = slim
        if self._pending:
            batch, self._pending = self._pending, Events()
            yield batch
        while not decoder.ended:
            batch = self._next_batch()
            if batch.events:
                yield batch

    def __iter__(self) -> Iterator[dict]:
        for batch in self.batches():
            yield from batch.events
