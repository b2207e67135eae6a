"""Read stage: bytes in, trace events out, never holding the whole file.

What this module owns:
- opening a source (a path, ``-`` for stdin, a growing file through ``stream_split.follow``)
  and undoing its compression (gzip, zstd when ``zstandard`` is installed), detected from the
  bytes, not the file name;
- telling the three shapes apart: the object form ``{"traceEvents": [...], ...}`` (header keys
  before *and after* the array), the array form ``[...]`` (closing ``]`` optional) and JSON
  Lines (one event per line);
- parsing events incrementally with ijson's C backend (``use_float=True``);
- keeping the header keys, which are complete only at the end of the object form;
- telling a truncated input (a killed writer: everything complete is yielded, ``complete`` is
  False) from a broken one (``TraceInputError`` with a one-line message).

Two legal things that yajl refuses are mended on the byte stream before it sees them:
integers beyond 64 bits (quoted with a marker, restored as Python ints in the events) and
invalid UTF-8 (replaced by U+FFFD, which is all JSON can carry). A UTF-8 byte order mark is
skipped. Nesting deeper than ``MAX_DEPTH`` is an error (``TraceInputError``), found on the byte
stream before the parser builds the value: nothing downstream ever recurses without bound.

Waiting for bytes: a pipe, a FIFO or a terminal is polled (``_Source``), so a stop requested
by a signal (``run.StopRequest``) ends a read that would block forever (``ReadInterrupted``);
a FIFO is opened without waiting for its writer.
It never decides anything about iterations.
"""
from __future__ import annotations

import codecs
import gzip
import io
import json
import os
import re
import select
import stat
import sys
import zlib
from typing import BinaryIO, Iterator

import ijson
import numpy as np

from stream_split.trace_format import EVENTS_KEY

CHUNK = 256 * 1024
_HEAD_LIMIT = 16 * 1024 * 1024
_TAIL_WINDOW = 2 * CHUNK

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

# A run of 19+ digits in number position; values beyond int64 break yajl ("integer overflow").
_LONG_INT = re.compile(rb"(?<=[:\[,\s])(-?\d{19,})(?=[\s,\]}])")
_BIGINT_MARK = "\x00stream-split-bigint:"
_BIGINT_MARK_JSON = b'"\\u0000stream-split-bigint:'
_INT64_MAX = 2 ** 63 - 1
# A \uD800-\uDFFF escape. yajl turns a lone one into "?" (high) or bytes that are not UTF-8
# (low); each is replaced by a marker and restored as the code point it was.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE_MARK = "\x00stream-split-surrogate:"
_SURROGATE_MARKED = re.compile(_SURROGATE_MARK + "([0-9a-fA-F]{4})\x00")
_DIGITS_ONLY = bytes(0x30 if 0x30 <= b <= 0x39 else 0x2e for b in range(256))  # digit->"0"
_DIGIT_RUN = b"0" * 19
_EVENTS_KEY_BYTES = b'"' + EVENTS_KEY.encode() + b'"'


#: Deepest nesting of arrays and objects accepted in a document (Kineto writes about 6).
MAX_DEPTH = 200
_BOM = b"\xef\xbb\xbf"
#: How long one wait for a pipe lasts before a stop request is looked at again (seconds).
_POLL_INTERVAL = 0.1


class TraceInputError(Exception):
    """The input cannot be read as a trace; the message is one line for the user."""


class ReadInterrupted(Exception):
    """A stop was requested while the reader waited for bytes."""


def require_backend() -> None:
    if ijson.backend != "yajl2_c":  # pragma: no cover - depends on the installation
        raise TraceInputError(
            f"ijson's C backend (yajl2_c) is required for speed, found {ijson.backend!r}")


def open_source(source: str | BinaryIO, stop=None) -> tuple[BinaryIO, str]:
    """Open a path, ``-`` (stdin) or a binary stream; returns (stream, display name).

    ``stop`` (a ``run.StopRequest``) ends a wait for a pipe's bytes. A stream passed in is
    the caller's: its errors are the caller's too (Beam retries a storage error)."""
    if hasattr(source, "read"):
        return source, getattr(source, "name", "<stream>")
    if source == "-":
        from stream_split.follow import enlarge_pipe
        fd = sys.stdin.fileno()
        enlarge_pipe(fd)
        # Unbuffered: read(n) returns what the pipe holds now instead of waiting for n bytes,
        # so a live writer's events are parsed as they come.
        return _Source(fd, "<stdin>", stop, owned=False), "<stdin>"
    try:
        # O_NONBLOCK: opening a FIFO does not wait for a writer (the reads are polled).
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise TraceInputError(f"no such file: {source}") from None
    except IsADirectoryError:
        raise TraceInputError(f"is a directory, not a trace: {source}") from None
    except PermissionError:
        raise TraceInputError(f"permission denied: {source}") from None
    except NotADirectoryError:
        raise TraceInputError(f"a part of the path is not a folder: {source}") from None
    except (OSError, ValueError) as e:  # a link loop, a name too long, a NUL in the name...
        raise TraceInputError(f"cannot open {source}: {getattr(e, 'strerror', None) or e}") \
            from None
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.close(fd)
        raise TraceInputError(f"is a directory, not a trace: {source}")
    return _Source(fd, str(source), stop, owned=True), str(source)


class PipeWait:
    """Waits until a pipe, FIFO or terminal has bytes (or its writer is gone), looking every
    ``_POLL_INTERVAL`` at ``stopped()``: a signal handler only sets a flag (``StopRequest``),
    and a plain blocking read would not return for it. Regular files never wait."""

    def __init__(self, fd: int):
        self._poll = None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            self._poll = select.poll()
            self._poll.register(fd, select.POLLIN)

    def ready(self, stopped) -> bool:
        """True once a read will not block; False if ``stopped()`` came first."""
        if self._poll is None:
            return True
        while not stopped():
            if self._poll.poll(_POLL_INTERVAL * 1000):
                return True
        return False


class _Source(io.RawIOBase):
    """A file descriptor as a raw stream: a pipe, FIFO or terminal is waited on with
    ``PipeWait``, so that a stop request ends the wait (``ReadInterrupted``); a read error is
    the input's (one line), not a traceback."""

    def __init__(self, fd: int, name: str, stop, *, owned: bool):
        self._fd = fd
        self.name = name
        self._stopped = (lambda: stop.requested) if stop is not None else (lambda: False)
        self._owned = owned
        self._wait = PipeWait(fd)

    def readable(self):
        return True

    def read(self, n=-1):
        if n is None or n < 0:
            n = CHUNK
        while True:
            if not self._wait.ready(self._stopped):
                raise ReadInterrupted()
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


class _Decompressed(io.RawIOBase):
    """Undo gzip (possibly multi-member) or zstd on the fly; remembers a cut-off stream."""

    def __init__(self, raw: BinaryIO, kind: str):
        self._raw = raw
        self.truncated = False
        if kind == "gzip":
            self._inner = gzip.GzipFile(fileobj=raw, mode="rb")
            # read1: one decompression step at a time, so a cut-off stream loses no bytes
            # that were already decompressed.
            self._read = self._inner.read1
        else:
            try:
                import zstandard
            except ImportError:
                raise TraceInputError(
                    "zstd input needs the 'zstandard' package (pip install zstandard)") from None
            self._inner = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
            self._read = self._inner.read1 if hasattr(self._inner, "read1") else self._inner.read
        self._kind = kind

    def readable(self):
        return True

    def read(self, n=-1):
        if self.truncated:
            return b""
        try:
            return self._read(n)
        except EOFError:  # gzip: "Compressed file ended before the end-of-stream marker"
            self.truncated = True
            return b""
        except (gzip.BadGzipFile, zlib.error, OSError) as e:
            raise TraceInputError(f"corrupt {self._kind} stream: {e}") from None
        except Exception as e:
            if type(e).__name__ == "ZstdError":
                raise TraceInputError(f"corrupt zstd stream: {e}") from None
            raise


class _Peekable:
    """A byte stream with a replayable prefix (to sniff compression and shape)."""

    def __init__(self, raw: BinaryIO):
        self._raw = raw
        self._buf = b""

    def peek(self, n: int) -> bytes:
        while len(self._buf) < n:
            more = self._raw.read(max(n - len(self._buf), CHUNK))
            if not more:
                break
            self._buf += more
        return self._buf[:n]

    def peek_start(self, limit: int) -> bytes:
        """The buffered bytes once they hold a non-blank byte (or at EOF, or ``limit``): reads
        no more than that, so a growing file or a live pipe is not waited on."""
        while not self._buf.lstrip() and len(self._buf) < limit:
            more = self._raw.read(CHUNK)
            if not more:
                break
            self._buf += more
        return self._buf[:limit]

    def peek_line(self, limit: int) -> bytes:
        """Bytes up to and including the first newline, or up to ``limit`` bytes."""
        while b"\n" not in self._buf and len(self._buf) < limit:
            more = self._raw.read(CHUNK)
            if not more:
                break
            self._buf += more
        i = self._buf.find(b"\n")
        return self._buf[: i + 1] if i >= 0 else self._buf[:limit]

    def read(self, n: int = -1) -> bytes:
        if self._buf:
            if n < 0:
                out, self._buf = self._buf + self._raw.read(), b""
                return out
            out, self._buf = self._buf[:n], self._buf[n:]
            return out
        return self._raw.read(n)

    @property
    def truncated(self) -> bool:
        return getattr(self._raw, "truncated", False)


# Everything but the bytes that decide the JSON nesting: deleted by bytes.translate.
_NOT_STRUCTURAL = bytes(range(256)).translate(None, b'"{}[]')
_DEPTH_STEP = np.zeros(256, np.int8)
_DEPTH_STEP[list(b"[{")] = 1
_DEPTH_STEP[list(b"]}")] = -1


class BracketDepth:
    """The nesting depth of a JSON byte stream (brackets outside strings), chunk by chunk.

    Escapes are removed with ``bytes.replace``, everything but ``"{}[]`` is deleted with
    ``bytes.translate``, adjacent quote pairs (almost every string) with ``replace``; only what
    is left is split on quotes and summed with numpy: about 1 GB/s, against 30-50 MB/s for the
    parser. Exact for valid JSON, whatever the chunking."""

    def __init__(self):
        self.depth = 0
        self.in_string = False
        self.opened = False  # a bracket was opened (the top-level value has begun)
        self._escaped = False  # the previous chunk ended inside a string on an odd backslash run

    @property
    def state(self) -> tuple:
        return self.depth, self.in_string, self._escaped

    def feed(self, data: bytes) -> int:
        """Account for ``data``; returns the deepest nesting reached within it."""
        if self._escaped:
            self._escaped = False
            data = data[1:]
        if b"\\" in data:
            # Backslashes occur only inside strings: drop escaped backslashes, then escaped
            # quotes; a single one left at the very end escapes the next chunk's first byte.
            data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
            if data.endswith(b"\\"):
                self._escaped = True
                data = data[:-1]
        # Two adjacent quotes have nothing between them: removing them changes no bracket's
        # inside/outside.
        data = data.translate(None, _NOT_STRUCTURAL).replace(b'""', b"")
        if self.in_string or b'"' in data:
            parts = data.split(b'"')
            data = b"".join(parts[1::2] if self.in_string else parts[0::2])
            if len(parts) % 2 == 0:
                self.in_string = not self.in_string
        if not data:
            return self.depth
        path = np.cumsum(_DEPTH_STEP[np.frombuffer(data, np.uint8)], dtype=np.int64)
        peak = self.depth + int(path.max())
        self.opened = self.opened or peak > self.depth or b"[" in data or b"{" in data
        self.depth += int(path[-1])
        return peak


def _where_deeper(data: bytes, state: tuple, limit: int) -> int:
    """The offset in ``data`` where the nesting first exceeds ``limit`` (a slow scan, run only
    on that error)."""
    depth, in_string, escaped = state
    for i, byte in enumerate(data):
        if escaped:
            escaped = False
        elif in_string:
            if byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte == 0x5B or byte == 0x7B:
            depth += 1
            if depth > limit:
                return i
        elif byte == 0x5D or byte == 0x7D:
            depth -= 1
    return len(data)


class _FeedFilter:
    """What ijson reads from: mends legal input yajl refuses, keeps the head and the tail,
    and ends the stream where the nesting gets deeper than ``MAX_DEPTH`` (``too_deep``)."""

    def __init__(self, inner, keep_head: bool):
        self._inner = inner
        self._keep_head = keep_head
        self.head = bytearray()
        self._tail = [b"", b""]
        self._carry = b""
        self._utf8 = None
        self._depth = BracketDepth()
        self.too_deep: str | None = None
        self.marks = 0  # big integers and lone surrogates marked so far
        self.bytes_read = 0  # from the input (decompressed)
        self.bytes_out = 0   # handed to the parser (after mending)
        self.eof = False

    def read(self, n: int = CHUNK) -> bytes:
        if self.too_deep:
            return b""
        chunk = self._inner.read(n)
        if not chunk:
            self.eof = True
            out, self._carry = self._carry, b""
            return self._bounded(self._finish(out, final=True))
        self.bytes_read += len(chunk)
        return self._bounded(self._finish(self._carry + chunk, final=False))

    def _bounded(self, data: bytes) -> bytes:
        state = self._depth.state
        if self._depth.feed(data) > MAX_DEPTH:
            cut = _where_deeper(data, state, MAX_DEPTH)
            self.too_deep = (f"nested deeper than {MAX_DEPTH} levels "
                             f"(near byte {self.bytes_out + cut})")
            data = data[:cut]  # the parser still gets every value that ends before it
        self.bytes_out += len(data)
        self._tail = [self._tail[1], data]
        return data

    def _finish(self, data: bytes, final: bool) -> bytes:
        self._carry = b""
        if not final:
            # Hold back a trailing digit run (a big integer may continue in the next chunk)
            # and the escapes near the end (a surrogate pair may be cut in two).
            keep = len(data.rstrip(b"-0123456789"))
            if len(data) - keep >= 4096:
                keep = len(data)
            escape = data.find(b"\\", len(data) - 18)
            if escape >= 0:
                while escape > 0 and data[escape - 1] == 0x5C:  # the whole backslash run
                    escape -= 1
                keep = min(keep, escape)
            if keep < len(data):
                data, self._carry = data[:keep], data[keep:]
        if self._utf8 is not None or not data.isascii():
            data = self._sanitize_utf8(data, final)
        # A 19-digit run is rare: find one at C speed before running the regex at all.
        if _DIGIT_RUN in data.translate(_DIGITS_ONLY):
            data = _LONG_INT.sub(self._quote_bigint, data)
        if b"\\u" in data and _SURROGATE_ESCAPE.search(data):
            data = self._mark_lone_surrogates(data)
        if self._keep_head:
            self.head += data[: _HEAD_LIMIT - len(self.head)]
            if _EVENTS_KEY_BYTES in self.head or len(self.head) >= _HEAD_LIMIT:
                self._keep_head = False  # the header keys before the events are all here
        return data

    def _sanitize_utf8(self, data: bytes, final: bool) -> bytes:
        if self._utf8 is None:
            self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        return self._utf8.decode(data, final).encode("utf-8")

    def _quote_bigint(self, m: re.Match) -> bytes:
        digits = m.group(1)
        if abs(int(digits)) <= _INT64_MAX:
            return digits
        self.marks += 1
        return _BIGINT_MARK_JSON + digits + b'"'

    def _mark_lone_surrogates(self, data: bytes) -> bytes:
        """Replace each unpaired \\uD800-\\uDFFF escape by a marker (a pair is left alone:
        yajl decodes it). Only escapes after an even run of backslashes are escapes."""
        out, done, skip = [], 0, -1
        for m in _SURROGATE_ESCAPE.finditer(data):
            start = m.start()
            if start < skip:
                continue
            run = start
            while run > 0 and data[run - 1] == 0x5C:
                run -= 1
            if (start - run) % 2:
                continue  # an escaped backslash followed by the text "uD..."
            code = int(data[start + 2:start + 6], 16)
            low = _SURROGATE_ESCAPE.match(data, start + 6)
            if code < 0xDC00 and low and int(data[start + 8:start + 12], 16) >= 0xDC00:
                skip = start + 12  # a pair
                continue
            out.append(data[done:start])
            out.append(b"\\u0000stream-split-surrogate:%04x\\u0000" % code)
            done = m.end()
            self.marks += 1
        if not out:
            return data
        out.append(data[done:])
        return b"".join(out)

    @property
    def tail(self) -> bytes:
        return self._tail[0] + self._tail[1]


def _restore_marked(value) -> int:
    """Turn marked strings back into what they were (in place): big integers, lone surrogates
    (in values and keys). Returns how many marks it restored."""
    found = 0
    if isinstance(value, dict):
        for k in [k for k in value if _SURROGATE_MARK in k]:
            restored = _SURROGATE_MARKED.sub(_surrogate, k)
            value[restored] = value.pop(k)
            found += 1
        items = value.items()
    else:
        items = enumerate(value)
    for k, v in list(items):
        if isinstance(v, (dict, list)):
            found += _restore_marked(v)
        elif isinstance(v, str) and "\x00stream-split-" in v:
            if v.startswith(_BIGINT_MARK):
                value[k] = int(v[len(_BIGINT_MARK):])
                found += 1
            else:
                value[k], n = _SURROGATE_MARKED.subn(_surrogate, v)
                found += n
    return found


def _surrogate(m: re.Match) -> str:
    return chr(int(m.group(1), 16))


def _header_before(head: bytes) -> dict | None:
    """Header keys written before ``"traceEvents"``; None if the key is not in ``head``."""
    i = head.find(b'"' + EVENTS_KEY.encode() + b'"')
    if i < 0:
        return None
    text = head[:i].strip()
    if not text.startswith(b"{"):
        return {}
    body = text[1:].strip().rstrip(b",")
    if not body:
        return {}
    try:
        value = json.loads(b"{" + body + b"}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _header_after(tail: bytes) -> dict:
    """Header keys written after the events array, found in the last bytes of the document."""
    for m in re.finditer(rb"\]", tail):
        rest = tail[m.end():].strip()
        if rest == b"}":
            return {}
        if rest.startswith(b",") and rest.endswith(b"}"):
            try:
                value = json.loads(b"{" + rest[1:])
            except ValueError:
                continue
            if isinstance(value, dict) and EVENTS_KEY not in value:  # not a `]` before the events
                return value
    return {}


class TraceReader:
    """Incremental reader of one trace. Iterate it for events (dicts, in file order).

    After (or during) iteration: ``form``, ``header_before``, ``header_after``, ``complete``,
    ``stop_reason`` (why it ended early, or None) and ``bytes_read``. A context manager:
    ``close()`` (idempotent) closes the file it opened, never a stream it was given.
    """

    def __init__(self, source: str | BinaryIO, *, name: str | None = None, stop=None):
        require_backend()
        raw, display = open_source(source, stop)
        self._raw = raw if isinstance(raw, _Source) else None
        self.name = name or display
        self.header_before: dict = {}
        self.header_after: dict = {}
        self.complete = False
        self.stop_reason: str | None = None
        try:
            stream = _Peekable(raw)
            magic = stream.peek(4)
            if magic[:2] == _GZIP_MAGIC:
                stream = _Peekable(_Decompressed(stream, "gzip"))
            elif magic == _ZSTD_MAGIC:
                stream = _Peekable(_Decompressed(stream, "zstd"))
            if stream.peek(len(_BOM)) == _BOM:  # legal at the start of UTF-8 text
                stream.read(len(_BOM))
            self._stream = stream
            self.form = self._sniff_form(stream)
        except BaseException:
            self.close()
            raise
        self._filter = _FeedFilter(stream, keep_head=self.form == "object")

    def close(self) -> None:
        if self._raw is not None:
            self._raw.close()
            self._raw = None

    def __enter__(self) -> "TraceReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _sniff_form(self, stream: _Peekable) -> str:
        start = stream.peek_start(64 * 1024).lstrip()
        if not start:
            if stream.truncated:
                raise TraceInputError("corrupt or empty compressed stream")
            raise TraceInputError("empty input")
        if start[:1] == b"[":
            return "array"
        if start[:1] != b"{":
            raise TraceInputError("not JSON: input starts with "
                                  f"{start[:12].decode('utf-8', 'replace')!r}")
        line = stream.peek_line(1 << 20).strip()
        if line.endswith(b"}") or line.endswith(b"},"):
            try:
                first = json.loads(line.rstrip(b","))
            except (ValueError, RecursionError):  # deep nesting: the reader reports it
                return "object"
            if isinstance(first, dict) and "ph" in first and EVENTS_KEY not in first:
                return "jsonl"
        return "object"

    @property
    def bytes_read(self) -> int:
        return self._filter.bytes_read

    def __iter__(self) -> Iterator[dict]:
        prefix, multiple = {"object": (EVENTS_KEY + ".item", False),
                            "array": ("item", False),
                            "jsonl": ("", True)}[self.form]
        events = ijson.items(self._filter, prefix, use_float=True, multiple_values=multiple)
        filt = self._filter
        restored = 0
        try:
            for event in events:
                if filt.marks > restored or type(event) is not dict:
                    if type(event) is not dict:
                        raise TraceInputError("not a trace: an element of the events array "
                                              f"is {type(event).__name__}")
                    restored += _restore_marked(event)  # a marked value is in flight
                yield event
        except ijson.JSONError as e:
            if filt.too_deep:
                raise TraceInputError(filt.too_deep) from None
            full = e.args[0] if e.args else ""
            if isinstance(full, bytes):
                full = full.decode("utf-8", "replace")
            message = full.splitlines()[0] if full else type(e).__name__
            if "premature EOF" in message or self._stream.truncated:
                self.complete = False
                self.stop_reason = ("input ended before the end of the JSON document "
                                    f"(after {filt.bytes_read} bytes)")
                self._finish_header(complete_document=False)
                return
            raise TraceInputError(f"not valid JSON: {message.strip()} "
                                  f"(near byte {self._error_offset(full)})") from None
        if filt.too_deep:
            raise TraceInputError(filt.too_deep)
        if self._stream.truncated:
            self.complete = False
            self.stop_reason = "compressed stream ended before its end-of-stream marker"
            self._finish_header(complete_document=False)
            return
        self.complete = True
        self._finish_header(complete_document=True)

    def _error_offset(self, message: str) -> int:
        """Where yajl stopped, in bytes of the JSON text: its message shows the text around
        the error (30 bytes before it, line breaks as spaces), found again in the last bytes
        handed to it. Falls back to the end of what it was given."""
        filt = self._filter
        lines = message.split("\n")
        if len(lines) >= 3 and lines[2].endswith("^") and len(lines[2]) == 41:
            tail = filt.tail.replace(b"\n", b" ").replace(b"\r", b" ")
            for before in (30, 10, 0):
                shown = lines[1][40 - before:].encode("utf-8", "replace")
                found = tail.rfind(shown) if shown else -1
                if found >= 0:
                    return filt.bytes_out - len(filt.tail) + found + before
        return filt.bytes_out

    def _finish_header(self, complete_document: bool) -> None:
        if self.form != "object":
            return
        head = bytes(self._filter.head)
        before = _header_before(head)
        if before is None:
            if complete_document:
                raise TraceInputError(f"not a trace: JSON object without \"{EVENTS_KEY}\"")
            return  # cut inside the header: no event was complete
        events_value = head[head.find(_EVENTS_KEY_BYTES) + len(_EVENTS_KEY_BYTES):]
        events_value = events_value.lstrip(b" \t\r\n:")[:1]
        if events_value and events_value != b"[":
            raise TraceInputError(f"not a trace: \"{EVENTS_KEY}\" is not an array")
        _restore_marked(before)
        self.header_before = before
        if complete_document:
            self.header_after = _header_after(self._filter.tail)
            _restore_marked(self.header_after)
