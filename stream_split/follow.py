"""Follow a trace file that is still being written (``--follow``), and large pipe buffers.

``FollowedFile(path, idle_timeout=10.0)`` is a raw binary stream for ``TraceReader``: ``read(n)``
returns the bytes the writer has added so far (at least one, at most ``n``), waits when there
are none (woken by inotify where Linux allows, ``stream_split.watch``; else polling every
20 ms, backing off to 200 ms), and returns ``b""`` (end of input) when

* the writer has finished: the JSON document (object form, or array form with its ``]``) is
  complete, or a gzip / zstd stream has reached its end-of-stream marker. ijson reads on after
  the final ``}`` to make sure nothing follows, so without this it would wait for the idle
  timeout at the end of every finished trace;
* no new byte has arrived for ``idle_timeout`` seconds (JSON Lines, an unterminated array, a
  writer that died);
* ``stop()`` was called (from another thread, or from the CLI's SIGINT/SIGTERM handler through
  ``run.StopRequest``; the wait is a short ``time.sleep``, after which it is seen).

Who undoes compression. ``TraceReader`` wraps ``gzip.GzipFile`` around a compressed stream, but
then this class would only see compressed bytes and could not tell that the document is
complete, and ``GzipFile.read(n)`` itself waits for ``n`` decompressed bytes. So a followed
gzip (or zstd, when ``zstandard`` is installed) file is decompressed here, with zlib's
incremental decompressor, which hands out whatever a ``Z_SYNC_FLUSH`` made available;
``TraceReader`` then sees plain JSON. There is still one decompression pass, not two.
``truncated`` is True when the input ended (idle, stop) in the middle of a compressed stream,
which ``TraceReader`` reports as it does for a cut-off ``.gz``.

The end of the document is found on the bytes handed out at C speed, by the reader's
``BracketDepth`` (the brackets outside strings; about 1 GB/s, against ~30-50 MB/s for the
parser). JSON Lines
(the first line is a whole event) needs no tracking: every line is a complete document.

A file renamed while it is read (Kineto writes ``<name>.tmp`` and renames it at the end) keeps
being read through the same open descriptor. A path that does not exist yet is waited for,
up to ``idle_timeout``; while waiting, ``<path>.tmp`` is taken if it appears first (Kineto's
file under its final name). ``-`` or a FIFO is read as a pipe: until its writer closes it.

``enlarge_pipe(fd)`` raises a pipe's buffer to 1 MiB on Linux (fewer wake-ups for both ends of
``zcat t.json.gz | stream-split ...``); it does nothing for other files or systems.
"""
from __future__ import annotations

import json
import os
import stat
import sys
import time
import zlib

from stream_split.read import BracketDepth, PipeWait, TraceInputError
from stream_split.trace_format import EVENTS_KEY
from stream_split.watch import wait_for_growth

__all__ = ["FollowedFile", "enlarge_pipe", "PIPE_SIZE"]

PIPE_SIZE = 1 << 20
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ (Linux), absent from older fcntl modules
_F_GETPIPE_SZ = 1032

POLL_START = 0.02
POLL_MAX = 0.2
_RAW_CHUNK = 256 * 1024
_FORM_HEAD_LIMIT = 1 << 20

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"



def enlarge_pipe(fd: int, size: int = PIPE_SIZE) -> int | None:
    """Ask for a ``size``-byte buffer if ``fd`` is a pipe (Linux). Returns the new size or None.

    Failures (not a pipe, not Linux, above ``/proc/sys/fs/pipe-max-size`` for an unprivileged
    user) are ignored: a bigger buffer is only an optimisation."""
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return None
        import fcntl
        return fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", _F_SETPIPE_SZ), size)
    except (OSError, ValueError, ImportError):
        return None


class _DocumentEnd:
    """Tells, chunk by chunk, when the top-level JSON value of a byte stream is complete.

    ``form`` is None until known, then "object", "array" or "jsonl" (decided like
    ``TraceReader`` does: a first line that is a whole event means JSON Lines), or "other"
    (not JSON; the reader reports it). Exact for valid JSON, whatever the chunking; bytes
    after the end do not un-complete it."""

    def __init__(self):
        self.form: str | None = None
        self.complete = False
        self._brackets = BracketDepth()
        self._head = bytearray()  # kept until the form is known (object or JSON Lines)

    def feed(self, data: bytes) -> None:
        if self.complete or self.form in ("jsonl", "other") or not data:
            return
        if self.form is None and not self._sniff(data):
            return
        brackets = self._brackets
        brackets.feed(data)
        if brackets.opened and brackets.depth <= 0 and not brackets.in_string:
            if self.form is None:
                # A whole value without a newline yet: a one-line document, or one event.
                self._decide(bytes(self._head))
                self._head = bytearray()
            if self.form in ("object", "array"):
                self.complete = True

    def _sniff(self, data: bytes) -> bool:
        """Learn the form from the first bytes; True when ``data`` must be tracked."""
        if not self._head:
            start = data.lstrip().removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark
            if not start:
                return False
            if start[:1] == b"[":
                self.form = "array"
                self._head = bytearray()
                return True
            if start[:1] != b"{":
                self.form = "other"
                return False
        self._head += data
        newline = self._head.find(b"\n")
        if newline >= 0:
            self._decide(bytes(self._head[:newline]))
        elif len(self._head) > _FORM_HEAD_LIMIT:
            self.form = "object"
        if self.form is not None:
            self._head = bytearray()
        return self.form != "jsonl"

    def _decide(self, first_line: bytes) -> None:
        """Same rule as ``TraceReader._sniff_form``."""
        line = first_line.strip()
        self.form = "object"
        if line.endswith(b"}") or line.endswith(b"},"):
            try:
                first = json.loads(line.rstrip(b","))
            except (ValueError, RecursionError):  # deep nesting: the reader reports it
                return
            if isinstance(first, dict) and "ph" in first and EVENTS_KEY not in first:
                self.form = "jsonl"


class FollowedFile:
    """A growing trace file as a raw binary stream (see the module docstring).

    Attributes: ``name``, ``idle_timeout``, ``compression`` (None, "gzip" or "zstd"),
    ``form`` (as far as known), ``end_reason`` (None while reading, then "document",
    "stream end", "idle", "stopped", "pipe closed" or "file truncated"), ``truncated``,
    ``bytes_in`` (bytes read from the file) and ``bytes_out`` (bytes handed out)."""

    def __init__(self, path: str, *, idle_timeout: float = 10.0, poll: float = POLL_START,
                 max_poll: float = POLL_MAX):
        self.name = str(path)
        self.idle_timeout = float(idle_timeout)
        self._poll = poll
        self._max_poll = max(max_poll, poll)
        self.compression: str | None = None
        self.end_reason: str | None = None
        self.bytes_in = 0
        self.bytes_out = 0
        self._stopped = False
        self._eof = False
        self._doc = _DocumentEnd()
        self._sniffed = False
        self._raw_head = b""    # first bytes, until the compression is known
        self._ready = b""       # plain bytes in hand, not handed out yet
        self._last_input = time.monotonic()
        self._zin = b""         # compressed bytes not yet given to the decompressor
        self._dec = None        # the decompressor of the current gzip member / zstd frame
        self._members = 0       # compressed members / frames completed
        self._closefd = True
        self._fd, self._pipe = self._open(self.name)
        self._pipe_wait = PipeWait(self._fd)

    # -- opening -------------------------------------------------------------------------------

    def _open(self, path: str) -> tuple[int, bool]:
        if path == "-":
            fd = sys.stdin.fileno()
            self._closefd = False
            enlarge_pipe(fd)
            return fd, not stat.S_ISREG(os.fstat(fd).st_mode)
        deadline = time.monotonic() + self.idle_timeout
        delay = self._poll
        while True:
            for candidate in (path, path + ".tmp"):
                try:
                    # O_NONBLOCK: a FIFO opens without waiting for its writer (reads wait in
                    # PipeWait, where a stop request is seen).
                    fd = os.open(candidate, os.O_RDONLY | os.O_NONBLOCK)
                except FileNotFoundError:
                    continue
                except PermissionError:
                    raise TraceInputError(f"permission denied: {candidate}") from None
                except IsADirectoryError:
                    raise TraceInputError(f"is a directory, not a trace: {candidate}") from None
                mode = os.fstat(fd).st_mode
                if stat.S_ISDIR(mode):
                    os.close(fd)
                    raise TraceInputError(f"is a directory, not a trace: {candidate}")
                pipe = stat.S_ISFIFO(mode)
                if pipe:
                    enlarge_pipe(fd)
                return fd, pipe
            if self._stopped or time.monotonic() >= deadline:
                raise TraceInputError(
                    f"no such file: {path} (waited {self.idle_timeout:g} s for it to appear)")
            time.sleep(delay)
            delay = min(delay * 1.5, self._max_poll)

    # -- the stream interface ------------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    @property
    def form(self) -> str | None:
        return self._doc.form

    @property
    def truncated(self) -> bool:
        """The input ended inside a compressed stream (as a cut-off ``.gz`` does)."""
        return (self._eof and self.compression is not None
                and (self._dec is not None or self._members == 0)
                and not self._doc.complete)

    def stop(self) -> None:
        """Make the next (or the waiting) ``read`` return ``b""``; callable from any thread."""
        self._stopped = True

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            parts = []
            while True:
                part = self.read(_RAW_CHUNK)
                if not part:
                    return b"".join(parts)
                parts.append(part)
        if n == 0 or self._eof:
            return b""
        delay = self._poll
        started = time.monotonic()
        while True:
            if self._stopped:
                return self._end("stopped")
            data = self._pull(n)
            if data:
                self._doc.feed(data)
                self.bytes_out += len(data)
                return data
            if self._eof:  # a closed pipe
                return b""
            if self._doc.complete:
                return self._end("document")
            if self._members and self._dec is None and not self._zin:
                return self._end("stream end")
            if self._shrunk():
                return self._end("file truncated")
            if time.monotonic() - max(started, self._last_input) >= self.idle_timeout:
                return self._end("idle")
            wait_for_growth(self, delay)
            delay = min(delay * 1.5, self._max_poll)

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if self._fd >= 0 and self._closefd:
            os.close(self._fd)
        self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # -- internals -----------------------------------------------------------------------------

    def _end(self, reason: str) -> bytes:
        self._eof = True
        self.end_reason = self.end_reason or reason
        return b""

    def _read_raw(self, n: int) -> bytes:
        if not self._pipe_wait.ready(lambda: self._stopped):
            return b""  # stopped: ``read`` ends the stream
        try:
            data = os.read(self._fd, n)
        except BlockingIOError:  # a FIFO opened O_NONBLOCK: nothing yet after all
            return b""
        if data:
            self.bytes_in += len(data)
            self._last_input = time.monotonic()
        elif self._pipe:
            self._end("pipe closed")
        return data

    def _shrunk(self) -> bool:
        if self._pipe:
            return False
        try:
            return os.fstat(self._fd).st_size < self.bytes_in
        except OSError:
            return False

    def _pull(self, n: int) -> bytes:
        """What can be handed out now, without waiting (a pipe may block): b"" if nothing."""
        if not self._sniffed:
            raw = self._read_raw(max(n, 4))
            self._raw_head += raw
            head = self._raw_head
            if ((len(head) < 2 and _GZIP_MAGIC.startswith(head))
                    or (len(head) < 4 and _ZSTD_MAGIC.startswith(head))):
                return b""  # nothing yet, or too few bytes to tell: wait for more
            self._sniffed = True
            self._raw_head = b""
            if head[:2] == _GZIP_MAGIC:
                self.compression = "gzip"
            elif head[:4] == _ZSTD_MAGIC and _has_zstandard():
                self.compression = "zstd"
            else:
                return self._keep(head, n)
            self._zin = head
            return self._inflate(n)
        if self._ready:  # plain bytes already in hand
            return self._keep(self._ready, n)
        if self.compression is None:
            return self._read_raw(n)
        return self._inflate(n)

    def _keep(self, data: bytes, n: int) -> bytes:
        out, self._ready = data[:n], data[n:]
        return out

    def _inflate(self, n: int) -> bytes:
        while True:
            if self._zin:
                if self._dec is None:
                    self._zin = self._zin.lstrip(b"\0")  # zero padding, as gzip allows
                    magic = _GZIP_MAGIC if self.compression == "gzip" else _ZSTD_MAGIC
                    if self._zin and not magic.startswith(self._zin[: len(magic)]):
                        raise TraceInputError(
                            f"corrupt {self.compression} stream: unexpected bytes after the end "
                            f"of member {self._members} (at byte {self.bytes_in - len(self._zin)})")
                    if len(self._zin) >= len(magic):
                        self._dec = self._new_decompressor()
                if self._dec is not None:
                    out = self._decompress(n)
                    if out:
                        return out
                    if self._zin and self._dec is None:
                        continue  # a member ended exactly here and another one follows
            raw = self._read_raw(_RAW_CHUNK)
            if not raw:
                return b""
            self._zin += raw

    def _new_decompressor(self):
        if self.compression == "gzip":
            return zlib.decompressobj(wbits=31)
        import zstandard
        return zstandard.ZstdDecompressor().decompressobj()

    def _decompress(self, n: int) -> bytes:
        dec = self._dec
        try:
            if self.compression == "gzip":
                out = dec.decompress(self._zin, n)
                rest = dec.unconsumed_tail
            else:
                out = dec.decompress(self._zin)
                rest = b""
        except zlib.error as e:
            raise TraceInputError(f"corrupt gzip stream: {e}") from None
        except Exception as e:
            if type(e).__name__ == "ZstdError":
                raise TraceInputError(f"corrupt zstd stream: {e}") from None
            raise
        if dec.eof:
            self._zin = dec.unused_data
            self._dec = None
            self._members += 1
        else:
            self._zin = rest
        if len(out) > n:  # zstd has no output limit: keep the rest for the next read
            out, self._ready = out[:n], out[n:]
        return out


def _has_zstandard() -> bool:
    try:
        import zstandard  # noqa: F401
    except ImportError:  # TraceReader then says that zstd input needs it
        return False
    return True
