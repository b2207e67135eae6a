"""The trace decoder: bytes in, events out with their original bytes. It does no I/O.

``TraceDecoder`` is sans-I/O in the manner of h11: a chunk source (a file, stdin, a followed
file, a Beam stream) hands it whatever bytes it has with ``receive_data(chunk)`` and ``b""`` at
the end of the input; each call returns the events completed by that chunk, as an ``Events``
batch (parsed events and, in parallel, each event's original bytes). It is the one place that

- detects compression (gzip, possibly multi-member, and zstd), from the bytes, once;
- tells the forms apart: the object form ``{"traceEvents": [...], ...}`` (header keys before
  *and after* the array), the array form ``[...]`` (closing ``]`` optional) and JSON Lines;
- keeps the header keys (``header_before``, ``header_after``) and tells a complete document
  (``complete``) from one that stopped early (``stop_reason``) or a broken one
  (``TraceInputError``, one line, "near byte N" of the JSON text).

How events are found (numpy framing). Only the brackets and backslashes of a chunk are
located (vectorized); a quote preceded by an odd run of backslashes is escaped; a bracket is
inside a string when an odd number of real quotes precede it (the parity read from the quote
mask packed into 64-bit words: ``Framing``); a ``cumsum``
over the remaining brackets gives the depth, whose returns to zero end the events. The state
at a chunk's edge (inside a string or not, the depth, a pending escape, where the unfinished
event opened) is carried to the next chunk, so every byte is framed once, however long an
event is. The separators between events are checked vectorized too. Where the package was
built with a C compiler, ``stream_split._native`` (``_native.c``) does the framing instead,
to the same result, three times as fast (``Framing``; ``STREAM_SPLIT_NO_NATIVE=1`` turns it
off, and ``stream-split --version`` says which one runs).

For the engine alone (``slim``, what ``run.drive`` reads), ``msgspec`` parses each run of
events between Python frames into structs holding only the fields the engine reads, typed as
it needs them (``validate.SlimEvent``; dicts where a type is not; where the native passes
are built and ``Input Dims`` is left as text, ``_native.kineto_events`` makes the same
structs of events written as Kineto writes them, in place), and each run
of Python frames (``FrameRun``) into the columns the engine decides them by (their times), with
no dict per frame; msgspec checks every byte as JSON all the same, and whatever it refuses
(or any doubt: a 64-bit-unsafe time, bytes that are not UTF-8) is parsed in full as below.

Each framed event is otherwise parsed by ``orjson``. The standard library parses the rare
event orjson refuses or would change: a run of 19 or more digits (an integer beyond 64 bits stays exact,
with no textual rewriting), a lone surrogate escape, invalid UTF-8 (replaced by U+FFFD, and the
event is then written from its parsed form: its original bytes are not UTF-8). Header keys are
parsed by the standard library too. Nesting deeper than ``MAX_DEPTH`` is an error found on the
bracket depths before anything recurses.
"""
from __future__ import annotations

import bisect
import ctypes
import json
import re
from itertools import repeat
from operator import attrgetter
from typing import Any, Iterator, Literal, TypedDict, Union

import msgspec
import numpy as np
import orjson
# ISA-L's inflate, about 4x as fast as zlib's. Its bz2-like decompressor writes each piece
# into one buffer of the size asked for: ``isal_zlib.decompressobj`` grew its buffer from
# 16 KiB, copying it at each step (on the 10x stripped resnet tile, 150 M instructions).
from isal import igzip_lib

from stream_split.core.serving import DIFFUSION_CODE
from stream_split.core.validate import SlimEvent, SlimEventWithDims
from stream_split.errors import TraceInputError
from stream_split.trace_format import (
    DIMS_ARG, ENGINE_ARGS, ENGINE_FIELDS, EVENTS_KEY, PYTHON_FRAME_CAT)

# The hot passes in native code where built and not turned off (``stream_split.native``),
# else None: numpy and msgspec do the same (``Framing``, ``_frame_columns``). The tests switch
# ``_native`` here, and the writer reads it here; the tests read ``_built_native`` too.
from stream_split.native import BUILT as _built_native  # noqa: F401
from stream_split.native import NATIVE as _native, NO_NATIVE_ENV  # noqa: F401
#: The decoder's hot passes in this process: "native" or "numpy" (``stream-split --version``).
DECODER_PASSES = "numpy" if _native is None else "native"

#: Deepest nesting of arrays and objects accepted in a document (Kineto writes about 6).
MAX_DEPTH = 200
#: Longest event accepted, in bytes of JSON text (and longest run of header keys, before or
#: after the events): what the decoder may hold at once. Kineto's longest are a few KiB.
MAX_EVENT_BYTES = 64 << 20
#: Separators between two events are kept up to this many bytes; beyond, they are checked
#: and dropped (a run of whitespace of any length takes no memory).
_GAP_KEEP = 64 << 10
#: Bytes between two framing states kept by the header's reader (``_read_head``).
_MARK_EVERY = 4096
#: The smallest piece of plain bytes that ``TraceDecoder._straddled`` takes without a copy:
#: below, the copy costs less than emitting the event it ends alone (an ``_emit`` more).
_STRADDLE_MIN = 64 << 10
#: ... and the most brackets it looks among for the end of the event open before it (an
#: event of more is joined to it the usual way).
_STRADDLE_BRACKETS = 256

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: A zstd skippable frame begins with 0x184D2A50 to 0x184D2A5F (little-endian): its first
#: byte is 0x50 to 0x5F ("P" here), the others these.
ZSTD_SKIPPABLE = b"\x50\x2a\x4d\x18"
#: Most plain bytes handed on at once (a decompression call, a slice of a large chunk): the
#: decoder's working memory for one piece is a few times this.
PLAIN_PIECE = 1 << 20
#: Bytes of JSON text decoded for one batch of events at most (``TraceDecoder.receive_more``):
#: a compressed chunk that expands to more is handed out in several batches.
BATCH_PLAIN = 8 << 20
#: Compressed bytes given to zstd per call: a zstd block (128 KiB of output at most) takes at
#: least 4 bytes, so one call makes at most about 4 MiB, even of a bomb.
ZSTD_STEP = 128
_BOM = b"\xef\xbb\xbf"
_WHITESPACE = b" \t\r\n"
_BLANK_BYTES = (b" ", b"\n", b"\r", b"\t")
_EVENTS_KEY_BYTES = b'"' + EVENTS_KEY.encode() + b'"'
#: How Kineto begins a Python frame event, and the shortest run of them worth a batch.
FRAME_PREFIX = b'{"ph": "X", "cat": "' + PYTHON_FRAME_CAT.encode() + b'", '
MIN_FRAME_RUN = 8
#: How much of the first line of an object is read to tell JSON Lines from the object form.
_FORM_LINE_LIMIT = 1 << 20

# A run of 19 digits: the value may not fit 64 bits (orjson would make it a float).
_DIGITS_ONLY = bytes(0x30 if 0x30 <= b <= 0x39 else 0x2E for b in range(256))
_DIGIT_RUN = b"0" * 19


class _RunText:
    """The bytes of a run of frames read in bulk where the native reader read them in place
    (``_frame_items``): ``buf[start:end]``, made a JSON array (``_array_of``) only when they
    are asked for (``FrameRun._bytes``: the engine reads most runs by their times alone), then
    kept here for every copy of the run (``FrameRun.shifted``, ``cut``)."""
    __slots__ = ("buf", "start", "end", "text")

    def __init__(self, buf: bytes, start: int, end: int):
        self.buf, self.start, self.end, self.text = buf, start, end, None

    def made(self) -> bytes:
        if self.text is None:
            self.text, self.buf = _array_of(self.buf, self.start, self.end), None
        return self.text


class FrameRun:
    """Events ``i`` to ``j`` (excluded) of a batch begin as Kineto writes a Python frame
    (``FRAME_PREFIX``, however spaced: ``_frame_runs``), at least ``MIN_FRAME_RUN`` of them in
    a row: a hint for the engine,
    which checks them (``Splitter.feed_batch``).

    In a slim batch (``TraceDecoder.slim``) the decoder may have read the run's times in bulk
    instead of making a dict per frame: then ``starts`` and ``ends`` are float64 arrays (``ts``
    and ``ts + dur``, as ``Splitter.feed`` computes them) and every frame in it is one the engine
    owns by its window alone (an ``X`` of category ``python_function`` with a finite float
    ``ts``, a float or null ``dur``, usable ``name``, ``pid`` and ``tid``, and no correlation
    or External id in its ``args``); the batch's ``events`` hold None in their place, and
    ``events()`` parses them when the engine must look at each one. Otherwise ``starts`` is
    None and ``events()`` is the batch's dicts. ``threads_and_names()``: each frame's
    (pid, tid) and name (None as ""), what the detector reads of a frame, without a dict
    per frame where the run was read in bulk. A run read in bulk may be pickled (``split
    --workers`` sends its ranges' runs to the engine's process: ``__reduce__``)."""

    __slots__ = ("i", "j", "starts", "ends", "_text", "_events", "_frames", "_part_of",
                 "_text_holds", "_packed", "_places", "_fields")

    def __init__(self, i: int, j: int, starts=None, ends=None, text: bytes = b"",
                 events: list | None = None, frames: list | None = None,
                 part_of: tuple | None = None, text_holds: dict | None = None):
        self.i, self.j = i, j
        self.starts, self.ends = starts, ends
        self._text = text  # the run's bytes as a JSON array (when read in bulk)
        self._events = events
        self._frames = frames  # the ``_PlainFrame`` of each (when read in bulk)
        self._part_of = part_of  # (run, first, last) of a run read in bulk that was cut
        # bytes -> whether ``_text`` holds them (``_holds``), shared by the run's shifted copies
        self._text_holds = {} if text_holds is None else text_holds
        self._packed = None  # ``_frames`` as MessagePack, after a pickle (``__reduce__``)
        self._places = None  # where each frame lies in the bytes, once found (``_apart``)
        # Each frame's threads and names read natively, once asked (``_fields_read``); ()
        # where the native reader does not read them
        self._fields = None

    def __reduce__(self):
        """Pickled (a worker of ``split --workers`` sends its ranges' runs) with its bytes, as
        an array, and what ``_holds`` found in them, and, where they were made, each frame's
        ``_PlainFrame`` as MessagePack, read back only if the engine asks for them
        (``_plain_frames``): pickling the structs themselves cost more than decoding the
        run did (10 ms against 0.6 for 4.5 k frames). The engine's process then decodes the
        frames it asks for alone, from the bytes, as one stream does (``_apart``): on the 10x
        stripped resnet tile, sent without their bytes and with every frame made and packed
        instead, the workers' decoding made each frame (840 M instructions each) and the
        engine unpacked whole runs (421 M; callgrind of ``split --workers 2``: 18,000.6 ->
        15,221.4 M in all, the engine's process 8,974.1 -> 8,664.8)."""
        packed = None if self._frames is None else _FRAMES_PACKER.encode(self._frames)
        return _unpickled_run, (self.i, self.j, self.starts, self.ends,
                                self._bytes() if self._text else self._text,
                                self._events, packed, self._part_of, self._text_holds)

    def shifted(self, by: int) -> "FrameRun":
        run = FrameRun(self.i + by, self.j + by, self.starts, self.ends, self._text,
                       self._events, self._frames, self._part_of, self._text_holds)
        run._packed, run._places, run._fields = self._packed, self._places, self._fields
        return run

    def cut(self, k: int) -> tuple:
        """The run as two, before its ``k``-th frame; a run read in bulk stays so (its
        halves' events are parsed from the whole run, if ever asked for)."""
        n = self.j - self.i
        halves = []
        for a, b, i in ((0, k, self.i), (k, n, self.i + k)):
            if self.starts is None:
                halves.append(FrameRun(i, i + b - a, events=self.events()[a:b]))
            else:
                halves.append(FrameRun(i, i + b - a, self.starts[a:b], self.ends[a:b],
                                       events=self._events and self._events[a:b],
                                       part_of=(self, a, b)))
        return tuple(halves)

    def events(self) -> list:
        """The run's events: as the batch's (dicts or slim structs), or parsed now as dicts
        for a run read in bulk."""
        if self._events is None:
            if self._part_of is not None:
                whole, a, b = self._part_of
                self._events = whole.events()[a:b]
            else:
                self._events = _parse_items(self._bytes())
        return self._events

    def names_begin_with(self, prefix: str) -> bool:
        """Whether a frame's name begins with ``prefix``: looked for in the run's bytes when
        it was read in bulk (no name made), else in its frames' names."""
        quoted = _quoted(prefix)
        if self._text:
            return self._holds(quoted)
        whole = self._bulk_run()  # the run this one was cut from: when no name there
        if whole is not None and not whole._holds(b"\\") and not whole._holds(quoted):
            return False  # (every name as it is, no escape) begins so, none here does
        frames = self._plain_frames()
        if frames is not None:
            return any(f.name and f.name.startswith(prefix) for f in frames)
        return any(isinstance(name := e.get("name"), str) and name.startswith(prefix)
                   for e in self.events())

    def _bulk_run(self) -> "FrameRun | None":
        """The run read in bulk that this one is, or was cut from (None: not read in bulk)."""
        run = self
        while not run._text and run._part_of is not None:
            run = run._part_of[0]
        return run if run._text else None

    def _plain_frames(self) -> list | None:
        """Each frame's ``_PlainFrame`` (a run read in bulk, or a part of one), else None;
        read back from MessagePack after a pickle (``__reduce__``), or made from the run's
        bytes where the native reader read only the times (``_frame_columns``: msgspec
        accepts what it accepts)."""
        if self._frames is None and self.starts is not None:
            if self._packed is not None:
                self._frames, self._packed = _FRAMES_UNPACKER.decode(self._packed), None
            elif self._part_of is not None:  # its own frames alone, where they can be
                self._frames = self._apart(range(self.j - self.i))
                if self._frames is None:
                    whole, a, b = self._part_of
                    frames = whole._plain_frames()
                    self._frames = None if frames is None else frames[a:b]
            elif self._text:
                self._frames = _PLAIN_FRAMES.decode(self._bytes())
        return self._frames

    def _apart(self, picked) -> list | None:
        """The ``_PlainFrame`` of the frames ``picked`` (indices in this run) alone: taken
        from the run read in bulk that this one is or was cut from (``_bulk_run``) where it
        has its frames, else decoded apart from its other frames, from its bytes (where each
        frame lies found once by framing them again: ``_native.frame``, 2 instructions a
        byte, where msgspec takes some 25 to decode them). None: not so (a pickled run
        whose frames came packed, or no native reader), for the caller to decode the run.
        ``run.drive`` feeds the engine parts of 1,024 events, so most runs are cut, and the
        engine asks for the frames of a part (``Splitter._feed_frames``) or a few of them
        (``_frames_opening_steps``): on the 10x stripped resnet tile, 5.8 k frames decoded
        where their whole runs made 63 k (``boundaries`` 10,929.7 -> 10,674.5 M
        instructions)."""
        if not picked:
            return []
        run, first = self, 0
        while run._frames is None and not run._text and run._part_of is not None:
            run, first = run._part_of[0], first + run._part_of[1]
        if run._frames is not None:
            frames = run._frames
            return [frames[first + k] for k in picked]
        if not run._text or run._packed is not None or _native is None:
            return None
        buf, start, end = run._in_place()
        if run._places is None:
            at, depths, *_ = _native.frame(memoryview(buf)[start:end], 0, False, 0, False)
            brackets, depth = np.frombuffer(at, np.int64), np.frombuffer(depths, np.int32)
            closes = np.flatnonzero(depth == 0)  # each frame's last bracket
            if closes.size != run.j - run.i:
                return None
            opens = np.empty(closes.size, np.int64)  # and its first
            opens[0], opens[1:] = 0, closes[:-1] + 1
            run._places = (brackets.take(opens).tolist(), (brackets.take(closes) + 1).tolist())
        starts, ends = run._places
        try:
            return _PLAIN_FRAMES.decode(b"[%b]" % b",".join(
                [buf[start + starts[k]:start + ends[k]] for k in
                 (picked if first == 0 else [first + k for k in picked])]))
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None

    def _in_place(self) -> tuple:
        """``(buf, start, end)``: where the frames of a run read in bulk lie, the commas
        between them included, not the brackets (in the batch's text where the native reader
        read them in place, else in the run's own array)."""
        text = self._text
        if text.__class__ is _RunText and text.text is None:  # read in place: not copied
            return text.buf, text.start, text.end
        buf = self._bytes()
        return buf, 1, len(buf) - 1

    def _fields_read(self, made_only: bool = False) -> tuple | None:
        """Each frame's (pid, tid) and name ("" for null), as lists, read by the native
        reader (``_native.frame_fields``) from the bytes of the run read in bulk that this one
        is or was cut from, and kept there for its every part; None where a run on the way
        has its frames made (``_plain_frames``: read from them), where the run was not read
        in bulk or came packed, and where the native reader does not read them (then
        msgspec does). ``made_only``: None unless they were read already (a few frames
        asked for: decoded apart, ``_apart``). On ``xdit_flux.1``'s capture trace, whose
        162 k frames the detector reads as evidence to the end, msgspec's structs of them
        took 8 % of the split's time."""
        run, first = self, 0
        while run._frames is None and run._fields is None and not run._text and \
                run._part_of is not None:
            run, first = run._part_of[0], first + run._part_of[1]
        if run._fields is None:
            if made_only or run._frames is not None or not run._text or \
                    run._packed is not None or _native is None:
                return None
            run._fields = _native.frame_fields(*run._in_place()) or ()
        if not run._fields:
            return None
        threads, names = run._fields
        n = self.j - self.i
        return threads[first:first + n], names[first:first + n]

    def _bytes(self) -> bytes:
        """The run's bytes as a JSON array (a run read in bulk), made the first time they are
        asked for where the native reader read the run in place (``_RunText``)."""
        text = self._text
        if text.__class__ is _RunText:
            text = self._text = text.made()
        return text

    def _holds(self, needle: bytes) -> bool:
        """``needle`` is in the run's bytes: looked for once (each part of a run cut into
        parts asks again, and the bytes are the whole run's)."""
        found = self._text_holds.get(needle)
        if found is None:
            found = self._text_holds[needle] = contains(self._bytes(), needle)
        return found

    def threads_and_names(self, picked: list | None = None) -> tuple[list, list]:
        """Each frame's (pid, tid), and its name (None as ""); of the frames ``picked`` (their
        indices in the run) only, when given."""
        few = picked is not None and len(picked) <= (self.j - self.i) * _PICKED_SHARE
        fields = self._fields_read(made_only=few)
        if fields is not None:
            threads, names = fields
            if picked is None:
                return threads, names
            return [threads[k] for k in picked], [names[k] for k in picked]
        frames = None
        if few and self._frames is None:
            frames = self._apart(picked)
        if frames is None:
            frames = self._plain_frames()
            if frames is not None and picked is not None:
                frames = [frames[k] for k in picked]
        if frames is not None:
            threads = list(map(_FRAME_THREAD, frames))
            names = list(map(_FRAME_NAME, frames))
            if None in names:
                names = [name or "" for name in names]
        else:
            events = self.events()
            if picked is not None:
                events = [events[k] for k in picked]
            # (a stretch's events are all dicts or all slim structs: each kind's ``get``)
            get = events[0].__class__.get if events else dict.get
            threads = list(zip(map(get, events, repeat("pid")), map(get, events, repeat("tid"))))
            names = [name or "" for name in map(get, events, repeat("name"))]
        return threads, names


def _unpickled_run(i, j, starts, ends, text, events, packed, part_of, text_holds) -> FrameRun:
    """A ``FrameRun`` from its pickle (``FrameRun.__reduce__``), its times of numpy's own
    float64 type (``_own_dtype``)."""
    starts, ends = _own_dtype(starts), _own_dtype(ends)
    run = FrameRun(i, j, starts, ends, text, events, part_of=part_of, text_holds=text_holds)
    run._packed = packed
    return run


def _own_dtype(times):
    """An unpickled float64 array (or None) viewed with numpy's own float64 type, not the equal
    one its pickle made: numpy compares a dtype by identity for its fast paths (``np.maximum.at``
    took its buffered way for the engine's frames, ``Splitter._count_cpu``: on the 10x stripped
    resnet tile, ``split --workers 2``'s engine process spent 282 M instructions there where one
    stream spent 39 M)."""
    return times if times is None else times.view(np.float64)


def _quoted(prefix: str) -> bytes:
    """How a JSON string beginning with ``prefix`` (and no escape) begins, in bytes."""
    return b'"' + prefix.encode()


class Events:
    """A batch of decoded events: ``events`` (dicts; in a slim batch, those decoded with the
    types the engine needs are ``validate.SlimEvent`` structs, every one of them when the
    batch is ``checked``) and ``raws`` (each event's original JSON bytes, or None where the
    event had to change: invalid UTF-8 was replaced).
    ``frame_runs``: the ``FrameRun`` of the batch, in order (a slim batch holds None in
    ``events`` for the frames of a run read in bulk)."""

    __slots__ = ("events", "raws", "frame_runs", "checked")

    def __init__(self, events=None, raws=None, frame_runs=None, checked: bool = False):
        self.events = events if events is not None else []
        self.raws = raws if raws is not None else []
        self.frame_runs = frame_runs if frame_runs is not None else []
        #: Every event's fields that the engine reads have the types it needs (each is a
        #: ``validate.SlimEvent``, or None in a frame run read in bulk), and the engine need
        #: not check them.
        self.checked = checked

    def __len__(self) -> int:
        return len(self.events)

    def parts(self, size: int) -> Iterator["Events"]:
        """The batch as consecutive batches of about ``size`` events (a frame run is never
        cut: a part may hold more), the batch itself when it is no larger."""
        n = len(self.events)
        if n <= size:
            yield self
            return
        runs = self.frame_runs
        at = r = 0
        while at < n:
            end = min(at + size, n)
            while r < len(runs) and runs[r].j <= at:
                r += 1
            if r < len(runs) and runs[r].i < end:  # a run reaches into this part: whole
                end = max(end, runs[r].j)
            inside = [run.shifted(-at) for run in runs if at <= run.i and run.j <= end]
            yield Events(self.events[at:end], self.raws[at:end] if self.raws else [], inside,
                         self.checked)
            at = end

    def slice(self, a: int, b: int) -> "Events":
        """Events ``a`` to ``b`` (excluded), a frame run across either edge cut there."""
        runs = []
        for run in self.frame_runs:
            if run.j <= a or run.i >= b:
                continue
            if run.i < a:
                run = run.cut(a - run.i)[1]
            if run.j > b:
                run = run.cut(b - run.i)[0]
            runs.append(run.shifted(-a))
        return Events(self.events[a:b], self.raws[a:b] if self.raws else [], runs,
                      self.checked)

    def extend(self, other: "Events") -> None:
        base = len(self.events)
        self.checked = other.checked and (self.checked or not base)
        self.events.extend(other.events)
        self.raws.extend(other.raws)
        self.frame_runs.extend(run.shifted(base) for run in other.frame_runs)


def _parse_items(array: bytes) -> list:
    """The items of a JSON array of events already checked by the fast path (``msgspec``),
    parsed in full: by the standard library when an integer may not fit 64 bits (orjson
    would make it a float) or orjson refuses a number (beyond a double), else by orjson."""
    if array.translate(_DIGITS_ONLY).find(_DIGIT_RUN) < 0:
        try:
            return orjson.loads(array)
        except orjson.JSONDecodeError:
            pass
    return parse_exact(array)[0]


# What a slim batch reads of an event: the fields the engine reads, ``args`` only as an object
# (or null: anything else is not a slim event, and the batch is parsed in full, where the
# engine finds the event invalid). Unknown fields are skipped, but still checked as JSON by
# msgspec. Each is first decoded with the types the engine needs, into structs
# (``validate.SlimEvent``): a batch msgspec accepts so is ``checked`` (the engine skips its own
# type checks); where it refuses a type, into dicts of the same fields as they are in the JSON
# (``Any``: the engine checks them). With ``Input Dims`` left as its JSON text
# (``TraceDecoder.lazy_dims``): most ops have them, few are read, and their lists of lists
# were a third of the time of this decode.


def _as_given_decoder(dims) -> msgspec.json.Decoder:
    """A decoder of a JSON array of events into slim dicts, each field as the JSON has it."""
    args_type = TypedDict("_SlimArgs", {**dict.fromkeys(ENGINE_ARGS, Any), DIMS_ARG: dims},
                          total=False)
    event_type = TypedDict("_SlimEvent", {**dict.fromkeys(ENGINE_FIELDS, Any),
                                          "args": Union[args_type, None]}, total=False)
    return msgspec.json.Decoder(list[event_type])


#: (checked, as in the JSON) decoders of slim batches, by ``lazy_dims``.
_SLIM_DECODERS = {
    lazy: (msgspec.json.Decoder(list[event_type]), _as_given_decoder(dims))
    for lazy, event_type, dims in ((False, SlimEventWithDims, Any),
                                   (True, SlimEvent, msgspec.Raw))}


class _FrameArgs(msgspec.Struct, gc=False):
    """A frame's ``args``: any object without the keys that would link the frame to GPU work
    or an annotation (no value is of the type ``UnsetType``: their presence fails the decode)."""
    correlation: msgspec.UnsetType = msgspec.UNSET
    external_id: msgspec.UnsetType = msgspec.field(name="External id", default=msgspec.UNSET)


class _PlainFrame(msgspec.Struct, gc=False, kw_only=True):
    """What the engine needs to own a Python frame by its window alone, with the types it
    accepts there (see ``FrameRun``); anything else fails the decode and the run is read as
    dicts. The fields are in the order Kineto writes the keys: msgspec looks a key up first
    at the field after the one found last, so each key is found at the first try (keyword-only,
    for ``ts`` to follow fields with defaults; on the 10x stripped resnet tile, the 344 k
    frames' decode took 2.0 G instructions, 65 M more with ``ts`` and ``dur`` first)."""
    ph: Literal["X"]
    cat: Literal["python_function"]
    name: Union[str, None] = None
    pid: Union[int, float, str, None] = None
    tid: Union[int, float, str, None] = None
    ts: float
    dur: Union[float, None] = None
    args: Union[_FrameArgs, None] = None


_PLAIN_FRAMES = msgspec.json.Decoder(list[_PlainFrame])
#: The largest share of a run's frames decoded apart when a few are asked for
#: (``FrameRun._apart``): beyond, the run's are decoded, and kept for the next question.
_PICKED_SHARE = 0.5
_FRAMES_PACKER = msgspec.msgpack.Encoder()
_FRAMES_UNPACKER = msgspec.msgpack.Decoder(list[_PlainFrame])
_FRAME_NAME = attrgetter("name")
_FRAME_THREAD = attrgetter("pid", "tid")
#: A float beyond this may have been an integer in the text (msgspec makes it a float): such
#: a run is read as dicts, where ``feed`` compares the integer exactly.
_EXACT_FLOAT_INTEGERS = 2.0 ** 53


def _ascii(buf: bytes, start: int, end: int) -> bool:
    """``buf[start:end]`` is ASCII: its largest byte, read by numpy in place (SIMD, no copy).
    On the 10x stripped resnet tile's 152 MB, 8 M instructions, where ``bytes.isascii`` of
    each stretch (8 bytes a step) took 133 M."""
    return start >= end or int(np.frombuffer(buf, np.uint8, end - start, start).max()) < 0x80


def _utf8(text: bytes) -> bool:
    """The bytes are UTF-8 (msgspec does not check the strings it skips)."""
    if text.isascii():
        return True
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _libc_memmem():
    """glibc's (or the platform C library's) ``memmem``, or None where there is none."""
    try:
        memmem = ctypes.CDLL(None).memmem
    except (AttributeError, OSError, TypeError):  # no such symbol; Windows: no CDLL(None)
        return None
    memmem.restype = ctypes.c_void_p
    memmem.argtypes = (ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t)
    return memmem


_MEMMEM = _libc_memmem()


def contains(haystack: bytes, needle: bytes) -> bool:
    """``needle in haystack``, by the C library's ``memmem`` where there is one: glibc's is
    about 4x as fast as Python's search of a needle of several bytes in a trace's text
    (whether the runs of Python frames of the 10x stripped resnet tile name diffusion code,
    ``FrameRun.names_begin_with``: 5.6 against 23.0 ms of CPU for their 80 MB; though it
    executes more instructions: 41 M more in callgrind). A one-byte needle is a ``memchr``
    either way."""
    if _MEMMEM is None or len(needle) < 2:
        return needle in haystack
    return _MEMMEM(haystack, len(haystack), needle, len(needle)) is not None


def _array_of(buf: bytes, start: int, end: int) -> bytes:
    """``buf[start:end]`` (events and the separators between them) as a JSON array: one
    copy of the bytes (a slice and two concatenations made three)."""
    return b"".join((b"[", memoryview(buf)[start:end], b"]"))


def _frame_columns(text: bytes):
    """(starts, ends, frames) of a run of Python frames (their bytes as a JSON array,
    ``_array_of``) when every one is a plain frame (``FrameRun``; ``frames``: each one's
    ``_PlainFrame``, or None when the native reader read the times: made from the text when
    asked, ``FrameRun._plain_frames``), else None. The run is valid JSON when this answers
    (msgspec, or the native reader, checks every byte; UTF-8 too, which the caller has
    checked: ``_ascii`` or ``_utf8``)."""
    times = None if _native is None else _native.frame_times(text)
    if times is not None:  # what msgspec would read, without a struct and a name per frame
        frames = None
        starts, durs = np.frombuffer(times[0], np.float64), np.frombuffer(times[1], np.float64)
        return _frame_times_columns(starts, durs, frames)
    try:
        frames = _PLAIN_FRAMES.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    n = len(frames)
    # (The attributes read in comprehensions: a quarter of the cost of ``attrgetter``.)
    starts = np.fromiter([frame.ts for frame in frames], np.float64, n)
    durs = np.fromiter([frame.dur for frame in frames], np.float64, n)  # null: NaN
    durs[np.isnan(durs)] = 0.0  # (JSON holds no NaN)
    return _frame_times_columns(starts, durs, frames)


#: What a run of frames read in place is asked about (``_frame_items``): whether one of its
#: names begins with diffusion code (``FrameRun.names_begin_with``, by the engine).
_NAME_PREFIX = DIFFUSION_CODE.encode()


def _frame_items(buf: bytes, start: int, end: int):
    """``_frame_columns`` of the run of frames ``buf[start:end]`` (UTF-8), read in place by
    the native reader (``_native.frame_items``: no copy of the run made an array), with
    what the run's ``_holds`` would find of ``_quoted(DIFFUSION_CODE)`` and of a backslash
    (one of its strings begins with the prefix; none holds a backslash): (starts, ends,
    None, text_holds), or None (the caller then reads the run as ``_frame_columns``)."""
    times = _native.frame_items(buf, start, end, _NAME_PREFIX)
    if times is None:
        return None
    columns = _frame_times_columns(np.frombuffer(times[0], np.float64),
                                   np.frombuffer(times[1], np.float64), None)
    if columns is None:
        return None
    return (*columns, {_quoted(DIFFUSION_CODE): times[2], b"\\": False})


def _frame_times_columns(starts: np.ndarray, durs: np.ndarray, frames):
    """``_frame_columns``' answer from the frames' times (and ``frames``), or None where a
    time is beyond what a float holds of an integer exactly."""
    if not (np.abs(starts).max(initial=0.0) < _EXACT_FLOAT_INTEGERS and
            np.abs(durs).max(initial=0.0) < _EXACT_FLOAT_INTEGERS):
        return None
    ends = np.where(durs != 0.0, starts + durs, starts)  # feed: ``if dur: ts + dur``
    return starts, ends, frames


def _raws(buf: bytes, starts, ends) -> list:
    """Each event's original bytes, ``buf[starts[k]:ends[k]]``: int64 arrays sliced in native
    code (``stream_split._native.slices``: on the 10x stripped tile's 564 k events about 220
    instructions an event against 1,280 for ``tolist`` and a comprehension), else lists."""
    if _native is not None:
        return _native.slices(buf, starts, ends)
    return [buf[s:e] for s, e in zip(starts, ends)]


def _reject_constant(name):
    raise ValueError(f"invalid literal {name}")


def parse_exact(text: bytes):
    """Parse one JSON value with the standard library: integers of any size exact, lone
    surrogates kept, NaN/Infinity refused (not JSON). Invalid UTF-8 becomes U+FFFD; the second
    value says whether that happened."""
    try:
        decoded, changed = str(text, "utf-8"), False  # bytes or a memoryview
    except UnicodeDecodeError:
        decoded, changed = str(text, "utf-8", "replace"), True
    return json.loads(decoded, parse_constant=_reject_constant), changed


class Decompressor:
    """Undoes gzip (any number of members) or zstd (any number of frames, skippable ones
    too, as ``pzstd`` writes them) chunk by chunk, or passes plain bytes.

    ``pieces(data)`` hands out the plain bytes in bounded pieces, however much one compressed
    chunk expands to (a bomb of whitespace included): gzip is asked for ``PLAIN_PIECE`` at
    most per call, zstd is given ``ZSTD_STEP`` compressed bytes per call; small outputs are
    joined up to ``PLAIN_PIECE``. ``feed(data)``: the pieces joined.

    ``kind`` is None until the first bytes tell, then "plain", "gzip" or "zstd".
    ``at_member_end``: every compressed byte so far belongs to finished members (a followed
    JSON Lines file may stop here); ``truncated`` (after ``finish``) the input ended inside one."""

    def __init__(self):
        self.kind: str | None = None
        self._head = b""
        self._pending = b""  # compressed bytes not yet given to a decompressor
        self._dec = None
        self.members = 0
        self.truncated = False

    @property
    def at_member_end(self) -> bool:
        return self.kind in ("gzip", "zstd") and self.members > 0 and self._dec is None \
            and not self._pending

    def feed(self, data: bytes) -> bytes:
        return b"".join(self.pieces(data))

    def pieces(self, data: bytes) -> Iterator[bytes]:
        """The plain bytes of ``data`` (what they complete), in bounded pieces."""
        if self.kind is None:
            self._head += data
            head = self._head
            if (len(head) < 2 and GZIP_MAGIC.startswith(head)) or \
                    (len(head) < 4 and _zstd_magic_prefix(head)):
                return
            self._head = b""
            self.kind = _compression_of(head)
            if self.kind == "zstd":
                _zstandard()  # installed, or one line saying so
            data = head
        if self.kind == "plain":
            yield data
        else:
            yield from _joined(self._inflate(data), PLAIN_PIECE)

    def finish(self) -> bytes:
        """End of input: what is left (plain bytes held while sniffing)."""
        if self.kind is None:
            head, self._head = self._head, b""
            self.kind = "plain"
            return head
        if self.kind != "plain" and (self._dec is not None or self.members == 0):
            self.truncated = True
        return b""

    def _inflate(self, data: bytes) -> Iterator[bytes]:
        self._pending += data
        while self._pending:
            if self._dec is None:
                self._pending = self._pending.lstrip(b"\0")  # zero padding, as gzip allows
                if not self._pending or not self._new_member():
                    break
            dec = self._dec
            yield from (self._inflate_gzip() if self.kind == "gzip" else self._inflate_zstd())
            if dec.eof:  # the member ended: what follows it begins the next one
                self._pending = dec.unused_data + self._pending
                self._dec = None
                self.members += 1

    def _new_member(self) -> bool:
        """A new member's decompressor, once its magic has come (False: not yet)."""
        pending = self._pending
        gzip = self.kind == "gzip"
        if not (GZIP_MAGIC.startswith(pending[:2]) if gzip else _zstd_magic_prefix(pending)):
            raise TraceInputError(
                f"corrupt {self.kind} stream: unexpected bytes after the end of member "
                f"{self.members}")
        if len(pending) < (2 if gzip else 4):
            return False
        self._dec = (igzip_lib.IgzipDecompressor(flag=igzip_lib.DECOMP_GZIP) if gzip else
                     _zstandard().ZstdDecompressor().decompressobj())
        return True

    def _inflate_gzip(self) -> Iterator[bytes]:
        """The member's output for the pending bytes, ``PLAIN_PIECE`` at most per call (the
        input it could not use yet it keeps: ``needs_input`` is False until it is used)."""
        dec, data = self._dec, self._pending
        self._pending = b""
        while True:
            try:
                out = dec.decompress(data, PLAIN_PIECE)
            except igzip_lib.IsalError as e:
                raise TraceInputError(f"corrupt gzip stream: {e}") from None
            if out:
                yield out
            data = b""
            if dec.eof or dec.needs_input:
                return

    def _inflate_zstd(self) -> Iterator[bytes]:
        """The frame's output for the pending bytes, ``ZSTD_STEP`` of them per call, joined
        up to ``PLAIN_PIECE``; at the frame's end, the bytes not given to it stay pending."""
        dec, data = self._dec, memoryview(self._pending)
        self._pending = b""
        zstd_error = _zstandard().ZstdError
        decompress = dec.decompress
        held, total = [], 0
        for at in range(0, len(data), ZSTD_STEP):
            try:
                out = decompress(data[at:at + ZSTD_STEP])
            except zstd_error as e:
                raise TraceInputError(f"corrupt zstd stream: {e}") from None
            if len(out) >= PLAIN_PIECE:  # a bomb's output: handed on as it is, not copied
                if held:
                    yield b"".join(held)
                    held, total = [], 0
                yield out
            elif out:
                held.append(out)
                total += len(out)
                if total >= PLAIN_PIECE:
                    yield b"".join(held)
                    held, total = [], 0
            if dec.eof:
                self._pending = bytes(data[at + ZSTD_STEP:])
                break
        if held:
            yield b"".join(held)


def _zstandard():
    """The ``zstandard`` module (an optional extra), or a ``TraceInputError`` saying so."""
    try:
        import zstandard
    except ImportError:
        raise TraceInputError("zstd input needs the 'zstandard' package "
                              "(pip install zstandard)") from None
    return zstandard


def _zstd_magic_prefix(data: bytes) -> bool:
    """``data`` begins like a zstd frame or a skippable frame (``ZSTD_SKIPPABLE``), as far
    as it goes."""
    head = data[:4]
    return ZSTD_MAGIC.startswith(head) or (
        not head or (head[0] & 0xF0 == 0x50 and ZSTD_SKIPPABLE[1:].startswith(head[1:])))


def _compression_of(head: bytes) -> str:
    if head[:2] == GZIP_MAGIC:
        return "gzip"
    if len(head) >= 4 and _zstd_magic_prefix(head):
        return "zstd"
    return "plain"


def _blank(data: bytes) -> bool:
    """``data`` is JSON whitespace only. A run of one byte is compared whole (memcmp: 10
    times faster than ``translate``, 60 times than ``strip(chars)``)."""
    first = data[:1]
    if first not in _BLANK_BYTES or data[-1:] not in _BLANK_BYTES:
        return not data
    return data == first * len(data) or not data.translate(None, _WHITESPACE)


def _rstripped_length(buf: bytes, start: int) -> int:
    """``len(buf[start:].rstrip())`` without the copy."""
    end = len(buf)
    while end > start and buf[end - 1] in b" \t\r\n\x0b\x0c":
        end -= 1
    return end - start


def _slices(pieces: Iterator[bytes], size: int) -> Iterator[bytes]:
    """``pieces``, each cut into slices of ``size`` bytes at most."""
    for piece in pieces:
        if len(piece) <= size:
            yield piece
        else:
            for at in range(0, len(piece), size):
                yield piece[at:at + size]


def _joined(pieces: Iterator[bytes], size: int) -> Iterator[bytes]:
    """``pieces`` joined while they stay under ``size`` bytes together (a compressed
    chunk's many small outputs as one batch, as before; a large one alone)."""
    held, total = [], 0
    for piece in pieces:
        if held and total + len(piece) > size:
            yield b"".join(held)
            held, total = [], 0
        held.append(piece)
        total += len(piece)
    if held:
        yield b"".join(held)


def sniff_form(start: bytes, final: bool) -> str | None:
    """"object", "array" or "jsonl" from the first bytes of the JSON text (BOM removed); None
    when more bytes are needed. A first line that is one whole event means JSON Lines."""
    text = start.lstrip()
    if not text:
        if final:
            raise TraceInputError("empty input")
        return None
    _refuse_wide_text(text)
    if text[:1] == b"[":
        return "array"
    if text[:1] != b"{":
        raise TraceInputError("not JSON: input starts with "
                              f"{text[:12].decode('utf-8', 'replace')!r}")
    newline = text.find(b"\n")
    if newline < 0:
        if not final and len(text) < _FORM_LINE_LIMIT and not _one_whole_value(text):
            return None
        line = text[:_FORM_LINE_LIMIT].strip()
    else:
        line = text[:newline].strip()
    if line.endswith(b"}") or line.endswith(b"},"):
        try:
            first = json.loads(line.rstrip(b","))
        except (ValueError, RecursionError):  # deep nesting: the framer reports it
            return "object"
        if isinstance(first, dict) and "ph" in first and EVENTS_KEY not in first:
            return "jsonl"
    return "object"


def _refuse_wide_text(text: bytes) -> None:
    """NUL bytes among the first ones: UTF-16 or UTF-32 text (a trace is UTF-8 JSON)."""
    if b"\0" in text[:64]:
        raise TraceInputError("not UTF-8 JSON: NUL bytes at the start of the text "
                              "(UTF-16 or UTF-32 text, or binary data?)")


def _one_whole_value(text: bytes) -> bool:
    """The text (no newline in it yet) is one JSON value whose last bracket has come: a
    one-line document written without a final newline is complete, not waiting for a line."""
    stripped = text.rstrip(_WHITESPACE)
    if not stripped.endswith(b"}"):
        return False
    depth = Framing(stripped).depth
    return bool(depth.size) and int(depth[-1]) == 0 and int(np.flatnonzero(depth == 0)[0]) == \
        depth.size - 1


class Framing:
    """The brackets outside strings of ``buf[start:]`` and their depths (see the module
    docstring), given the state at ``start``: inside a string or not, the depth, and whether
    the byte at ``start`` is escaped (an odd run of backslashes ended the bytes before it).
    ``end_state`` is that state at the end of ``buf``; ``quotes`` the real quotes (found when
    asked: only the header's reader needs them).

    A bracket is outside strings when an even number of real quotes precede it (odd when
    ``start`` is inside a string): the parity of the quotes before each bracket comes from
    the quote mask packed into 64-bit words (``_odd_quotes_before``), never listed. One array
    as long as the bytes is made (the quote mask, ``_quote_words``), and reused to find the
    brackets (``_bracket_offsets``): each such array is fresh memory, whose first touch (page
    faults) cost more than the passes over it. ``scratch``: a bool array the mask may be made
    in when it is long enough (a ``TraceDecoder`` keeps one: none is fresh then).

    Where ``stream_split._native`` is built (``_native.c``), it gives the same brackets,
    depths and end state in one native pass (0.05 s against 0.15 s of CPU for the 152 MB of
    the 10x stripped resnet tile, in 1 MiB pieces); a test compares the two on any bytes."""

    __slots__ = ("brackets", "depth", "end_state", "_a", "_start", "_quotes")

    def __init__(self, buf: bytes, start: int = 0, state: tuple = (False, 0, False),
                 scratch: np.ndarray | None = None):
        in_string, depth0, escaped = state
        if _native is not None:  # the same answer, a third of the time (_native.c)
            at, depths, *end_state = _native.frame(buf, start, in_string, depth0, escaped)
            self.brackets = np.frombuffer(at, np.int64)  # (bytearrays: writable views)
            self.depth = np.frombuffer(depths, np.int32)
            self.end_state = tuple(end_state)
        if escaped and start < len(buf):
            start += 1
        a = np.frombuffer(buf, np.uint8)[start:]
        self._a, self._start, self._quotes = a, start, None
        if _native is None:
            self._frame_with_numpy(buf, start, a, in_string, depth0, scratch)

    def _frame_with_numpy(self, buf, start: int, a: np.ndarray, in_string: bool, depth0: int,
                          scratch: np.ndarray | None) -> None:
        """The numpy passes: the fallback where ``stream_split._native`` is not built (what they do is
        said above; ``_native.c`` does the same a 64-byte block at a time)."""
        slashes = _backslashes(buf, start, a)
        words, scratch = _quote_words(a, slashes, scratch)
        brackets = _bracket_offsets(a, scratch)
        if a.size:
            odd_before, odd_all = _odd_quotes_before(words, brackets)
            brackets = brackets[odd_before == (1 if in_string else 0)]
        else:
            odd_all = False
        folded = a.take(brackets) | 0x20  # "[" as "{", "]" as "}", and "|" or "\\" as "|"
        pipes = folded == 124
        if pipes.any():
            brackets, folded = brackets[~pipes], folded[~pipes]
        step = (folded == 123).view(np.int8) * 2 - 1
        self.brackets = brackets + start
        self.depth = np.cumsum(step, dtype=np.int32)
        if depth0:
            self.depth += depth0
        end_in_string = in_string ^ odd_all
        end_escaped = False
        if slashes.size and slashes[-1] == a.size - 1:
            last = len(buf) - 1
            while last >= 0 and buf[last] == 0x5C:
                last -= 1
            end_escaped = bool((len(buf) - 1 - last) & 1)
        end_depth = int(self.depth[-1]) if self.depth.size else depth0
        self.end_state = (end_in_string, end_depth, end_escaped)

    def after(self, i: int) -> "Framing":
        """The framing of the same bytes from just after bracket ``i`` on, where the state
        is outside strings at depth 0 (an element closed there: ``TraceDecoder._straddled``):
        the same brackets, depths and end state as framed from there (not ``quotes``)."""
        tail = object.__new__(Framing)
        tail.brackets, tail.depth = self.brackets[i + 1:], self.depth[i + 1:]
        tail.end_state, tail._a, tail._start, tail._quotes = self.end_state, None, None, None
        return tail

    @property
    def quotes(self) -> np.ndarray:
        """Offsets in ``buf`` of the real (unescaped) quotes."""
        if self._quotes is None:
            a = self._a
            quotes = np.flatnonzero(a == 34)
            slashes = np.flatnonzero(a == 92)
            if quotes.size and slashes.size:
                quotes = np.setdiff1d(quotes, _escaped_quotes(a, slashes), assume_unique=True)
            self._quotes = quotes + self._start
        return self._quotes


_NONE = np.zeros(0, np.int64)


def _backslashes(buf, start: int, a: np.ndarray) -> np.ndarray:
    """Offsets in ``a`` (``buf[start:]`` as bytes) of its backslashes: none looked for
    byte by byte when ``find`` (memchr) sees none, as in most traces."""
    if buf.find(b"\\", start) < 0:
        return _NONE
    return np.flatnonzero(a == 92)


_ONE = np.uint64(1)


def _quote_words(a: np.ndarray, slashes: np.ndarray, scratch: np.ndarray | None) -> tuple:
    """(the real quotes of ``a`` as a mask packed into 64-bit words: bit ``i`` of word ``w``
    for offset ``64 w + i``; the mask's own bytes, ``a.size`` of them, free to be reused).
    The mask is made zero-padded to whole words (no copy to pad it), in ``scratch`` when it
    is long enough."""
    n = a.size
    padded = -(-n // 64) * 64
    if scratch is not None and scratch.size >= padded:
        is_quote = scratch[:padded]
    else:
        is_quote = np.empty(padded, bool)
    is_quote[n:] = False
    np.equal(a, 34, out=is_quote[:n])
    if slashes.size:
        is_quote[_escaped_quotes(a, slashes)] = False
    words = np.packbits(is_quote, bitorder="little").view("<u8").astype(np.uint64, copy=False)
    return words, is_quote[:n].view(np.uint8)


def _bracket_offsets(a: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """Offsets in ``a`` of its brackets, and of its pipes and backslashes (for the caller to
    drop), found in ``scratch`` (``a.size`` bytes, overwritten: no other array of that size
    is made). ``| 0x20`` folds "[" and "]" onto "{" and "}" (and "\\" onto "|"), and ``- 123``
    (wrapping) leaves "{", "|" and "}" at 0 to 2: one compare finds them.

    ``np.flatnonzero`` of the hits costs about 3 instructions a byte (a count, then a scan;
    some 480 M of the 10x stripped tile's ``boundaries``), yet two levels do no better: the
    8-byte words with a hit (``flatnonzero(words != 0)``), then the hits within those words
    only, measured 12,846.9 -> 12,847.0 M on ``boundaries``: one word in seven holds a hit,
    too many for numpy's sparse scan (its branchless one costs some 7 instructions an item),
    and mapping the hits back to offsets (a ``take``) some 13 an item."""
    np.bitwise_or(a, 0x20, out=scratch)
    scratch -= 123
    hits = scratch.view(bool)
    np.less_equal(scratch, 2, out=hits)
    return np.flatnonzero(hits)


def _odd_quotes_before(words: np.ndarray, positions: np.ndarray) -> tuple:
    """(for each of ``positions``, sorted offsets that are no quote: 1 when an odd number of
    quotes come before it, else 0, as uint8; whether the quotes are odd in all), the quotes
    given as a mask in 64-bit words (``_quote_words``). The quotes before a position are
    those of the words before its own (their parities carried by an exclusive XOR scan over
    the words) and the bits below it in its own word (a popcount of the word masked): a few
    passes over an eighth of the bytes and the positions, where counting the quotes between
    brackets (``np.add.reduceat``) took one slow pass over every byte."""
    word_odd = np.bitwise_count(words)
    word_odd &= 1
    carried = np.bitwise_xor.accumulate(word_odd)  # odd words up to each one, included
    odd_all = bool(carried[-1])
    carried ^= word_odd
    at = positions >> 6
    below = words.take(at)
    below &= (_ONE << (positions & 63).astype(np.uint64)) - _ONE
    odd = np.bitwise_count(below)
    odd &= 1
    odd ^= carried.take(at)
    return odd, odd_all


def _escaped_quotes(a: np.ndarray, slashes: np.ndarray) -> np.ndarray:
    """Offsets in ``a`` of the quotes escaped by the backslashes at ``slashes`` (an odd run of
    them right before)."""
    new_run = np.empty(slashes.size, bool)
    new_run[0] = True
    new_run[1:] = slashes[1:] - 1 != slashes[:-1]
    run_starts = slashes[new_run]
    run_ends = np.append(slashes[np.flatnonzero(new_run)[1:] - 1], slashes[-1]) + 1
    after = run_ends[((run_ends - run_starts) & 1 == 1) & (run_ends < a.size)]
    return after[a[after] == 34]


def _frame_prefix_pattern(prefix: bytes) -> re.Pattern:
    """``prefix`` (JSON text without escapes) as a pattern that any run of JSON whitespace
    may come before each of its tokens' bytes outside its strings, and whose whitespace there
    may be missing: what ``_native.prefixed_runs`` tests (``spaced_prefix``)."""
    parts, in_string = [], False
    for byte in prefix:
        char = bytes([byte])
        if not in_string:
            if char in _WHITESPACE:
                continue
            parts.append(rb"[ \t\n\r]*")
        parts.append(re.escape(char))
        if char == b'"':
            in_string = not in_string
    return re.compile(b"".join(parts))


#: ``FRAME_PREFIX`` however the writer spaces it (``_frame_runs``).
_FRAME_PREFIX_SPACED = _frame_prefix_pattern(FRAME_PREFIX)
#: JSON's whitespace bytes, as a lookup table.
_JSON_SPACE = np.zeros(256, bool)
_JSON_SPACE[list(_WHITESPACE)] = True


def _frame_runs(buf: bytes, starts: np.ndarray, ends: np.ndarray) -> list:
    """(i, j) slices of the framed events ``buf[starts[k]:ends[k]]`` that begin with
    ``FRAME_PREFIX`` however the whitespace between its tokens is written, something after
    it, ``MIN_FRAME_RUN`` or more in a row. Kineto's files come so spaced, and files remade
    one event a line as the prefix is (``../shared/tools/tile_trace.py``). In the first, each
    event's keys over lines (libkineto: ``{\n    "ph": "X", "cat": ...``; torch 2.13: a key a
    line), the prefix as it is found no run, and every frame went through the engine one by
    one (``xdit_flux.1``'s capture trace in ``../shared``: 162 k of its 193 k events)."""
    width = len(FRAME_PREFIX)
    if starts.size < MIN_FRAME_RUN or len(buf) < width:
        return []
    if _native is not None:  # one memcmp an event, whitespace walked only where it differs
        return _native.prefixed_runs(buf, starts, ends, FRAME_PREFIX, MIN_FRAME_RUN)
    # Each event's first ``width`` bytes against the prefix's (an array of n by width), as
    # ``_native.prefixed``: the same bytes (and more after them) begin with it; where they
    # first differ at a byte that is whitespace in neither, within the event, they do not,
    # however spaced (the two read alike up to there); the pattern is asked of the rest (a
    # tile's ops and GPU work differ at their category, a Kineto file's events at once).
    room = np.minimum(ends - starts, width)
    heads = np.minimum(starts[:, None] + np.arange(width), len(buf) - 1)
    got = np.frombuffer(buf, np.uint8)[heads]
    want = np.frombuffer(FRAME_PREFIX, np.uint8)
    differ = got != want
    at = differ.argmax(axis=1)
    same = ~differ.any(axis=1)
    frame = same & (ends - starts > width)
    apart = ~same & (at < room) & ~_JSON_SPACE[got[np.arange(at.size), at]] & \
        ~_JSON_SPACE[want[at]]
    match = _FRAME_PREFIX_SPACED.match
    for k in np.flatnonzero(~frame & ~apart).tolist():
        start, end = int(starts[k]), int(ends[k])
        found = match(buf, start, end)
        frame[k] = found is not None and found.end() < end
    if not frame.any():
        return []
    edges = np.flatnonzero(np.diff(frame.view(np.int8), prepend=0, append=0))
    firsts, lasts = edges[0::2], edges[1::2]
    long = lasts - firsts >= MIN_FRAME_RUN  # (the short runs dropped before any list)
    return list(zip(firsts[long].tolist(), lasts[long].tolist()))


class TraceDecoder:
    """Sans-I/O decoder of one trace (see the module docstring).

    ``receive_data(chunk)`` returns an ``Events`` batch; ``b""`` ends the input. Attributes:
    ``compression``, ``form`` (None until known), ``header_before``, ``header_after``,
    ``complete``, ``stop_reason``, ``bytes_in`` (input bytes received, compressed when the input
    is), ``bytes_decoded`` (bytes of JSON text), ``ended`` (the end of input was received) and
    ``at_rest`` (the document is complete, or a compressed stream ended between members: a
    followed file may stop waiting for more). ``keep_raws`` (default True): False leaves the
    batches' ``raws`` empty, for a consumer that never writes an event. ``slim`` (default
    False): batches for the engine alone, whose events hold only the fields it reads
    (``trace_format.ENGINE_FIELDS``) and whose runs of Python frames may be read in bulk
    (``FrameRun``); every event is still checked as JSON, and what the fast path refuses is
    parsed in full. ``lazy_dims`` (default False; with ``slim``): the ``args``' ``Input Dims``
    of a slim event as its JSON text (``msgspec.Raw``, ``trace_format.DIMS_ARG``), for a
    consumer that reads them through ``core.serving.input_dims`` (``run.drive``'s engine;
    not one that encodes the events again)."""

    def __init__(self, *, max_depth: int = MAX_DEPTH, max_event_bytes: int = MAX_EVENT_BYTES):
        self.max_depth = max_depth
        self.max_event_bytes = max_event_bytes
        self.keep_raws = True
        self.slim = False
        self.lazy_dims = False
        self._decompressor = Decompressor()
        self.form: str | None = None
        self.header_before: dict = {}
        self.header_after: dict = {}
        self.complete = False
        self.stop_reason: str | None = None
        self.bytes_in = 0
        self.bytes_decoded = 0
        self.ended = False
        self._document_done = False
        self._stage = "start"  # start -> head (object) -> events -> tail -> done
        self._buf = b""
        self._buf_offset = 0  # offset of _buf[0] in the JSON text
        # Events stage: bytes of _buf already framed, the framing state there, and where the
        # unfinished element opens (-1: none yet).
        self._scan_from = 0
        self._scan_state = (False, 0, False)
        self._first_open = -1
        # Where the events of _buf begin (the bytes before are the end of an event read
        # apart: ``_straddled``), their framing when made already (None: not yet), and that
        # event, handed out with them (None: none).
        self._events_from = 0
        self._framed: Framing | None = None
        self._alone: Events | None = None
        self._after_event = False  # a comma is due before the next event
        self._probe_at = 1 << 20  # an unfinished element this long is checked (doubling)
        self._bom_checked = False
        self._head_marks: list = []  # (offset in _buf, framing state there): _read_head
        self._known_opener: tuple | None = None  # (form, opener): ``events_open_after``
        self._out = Events()
        # Framing's working array, kept (``Framing``): fresh memory costs its page faults.
        self._scratch = np.empty(PLAIN_PIECE + 64, bool)
        self._plain: Iterator[bytes] | None = None  # the backlog (``receive_more``)
        self._error: TraceInputError | None = None

    # -- public ---------------------------------------------------------------------------

    def events_open_after(self, form: str, opener: bytes) -> None:
        """Told before the first bytes: the document is of ``form`` and begins with
        ``opener`` (``{"traceEvents": [`` or ``[``, exactly), whose last byte opens the events
        array: its events are read from there, the head not framed (``_read_head`` frames the
        document's first ``PLAIN_PIECE`` bytes to find the events key: 11 % of the
        instructions of ``parallel``'s workers decoding the 10x resnet tile's ranges, which
        are documents made so). The batches are those of the document read without being
        told; a document that does not begin so is read as any other."""
        self._known_opener = (form, opener)

    @property
    def compression(self) -> str | None:
        return self._decompressor.kind

    @property
    def at_rest(self) -> bool:
        return self._document_done or (self.form == "jsonl"
                                       and self._decompressor.at_member_end)

    def receive_data(self, data: bytes) -> Events:
        """Take the next bytes of input (``b""``: the end); returns the events they complete,
        or those of their first ``BATCH_PLAIN`` bytes of JSON text when they expand to more
        (a compressed chunk): ``backlog`` then says that ``receive_more`` has the rest, to be
        taken before the next bytes.

        An error of the input (``TraceInputError``) is raised after the events before it were
        returned: by this call when there are none, else by the next one."""
        if self._plain is not None:
            raise RuntimeError("receive_data with a backlog: receive_more first")
        if data:
            self.bytes_in += len(data)
            self._plain = _slices(self._decompressor.pieces(data), PLAIN_PIECE)
        return self._receive(final=not data)

    @property
    def backlog(self) -> bool:
        """Plain bytes of the last chunk wait to be decoded (``receive_more``)."""
        return self._plain is not None

    def receive_more(self) -> Events:
        """The events of the next ``BATCH_PLAIN`` bytes of the backlog."""
        return self._receive(final=False)

    def _receive(self, final: bool) -> Events:
        if self._error is not None:
            error, self._error = self._error, None
            self.ended = True
            raise error
        if self.ended:
            raise RuntimeError("receive_data after the end of input")
        out = self._out = Events(checked=True)  # until an event is not (``_emit``)
        try:
            if self._plain is not None:
                self._drain()
            elif final:
                self.ended = True
                self._receive_plain(self._decompressor.finish(), final=True)
        except TraceInputError as error:
            self._plain = None
            if not out.events:
                self.ended = True
                raise
            self._error = error
            self.ended = False
        return out

    def _drain(self) -> None:
        """Decode the backlog's pieces until ``BATCH_PLAIN`` bytes are done or none is left."""
        done = 0
        for plain in self._plain:
            self._receive_plain(plain, final=False)
            done += len(plain)
            if done >= BATCH_PLAIN:
                return
        self._plain = None

    # -- stages ---------------------------------------------------------------------------

    def _receive_plain(self, plain: bytes, final: bool) -> None:
        out = self._out
        if plain:
            self.bytes_decoded += len(plain)
            if not self._bom_checked:
                if len(self._buf) + len(plain) < len(_BOM) and not final and \
                        _BOM.startswith(self._buf + plain):
                    self._buf += plain
                    return
                plain = self._buf + plain
                self._buf = b""
                self._bom_checked = True
                if plain.startswith(_BOM):
                    plain = plain[len(_BOM):]
                    self._buf_offset = len(_BOM)
            if self._stage == "done":
                if plain.strip():
                    raise TraceInputError("not valid JSON: trailing garbage after the document "
                                          f"(near byte {self.bytes_decoded - len(plain)})")
                return
            if self._skip_blank(plain):
                return
            if self._outgrows(plain):  # said before the copy that joining it would make
                raise self._too_long("an event", self._first_open)
            self._join(plain)
        elif not final:
            return
        if self._stage == "start" and self._known_opener is not None:
            if len(self._buf) < len(self._known_opener[1]) and not final:
                return
            self._take_known_opener()
        if self._stage == "start":
            if not final and _blank(self._buf):
                self._consume(len(self._buf))  # whitespace before the document: dropped
                return
            self.form = sniff_form(self._buf, final)
            if self.form is None:
                return
            self._stage = "events" if self.form == "jsonl" else "head"
            if self.form == "array":
                lead = len(self._buf) - len(self._buf.lstrip())
                self._consume(lead + 1)
                self._reset_scan()
                self._stage = "events"
        if self._stage == "head":
            self._read_head(final)
        if self._stage == "events":
            self._read_events(out, final)
        if self._stage == "tail":
            self._read_tail(final)
        if final:
            self._end_of_input()

    def _take_known_opener(self) -> None:
        """The events begin after the opener ``events_open_after`` told, when ``_buf`` begins
        with it."""
        (form, opener), self._known_opener = self._known_opener, None
        if self._buf.startswith(opener):
            self.form = form
            self._consume(len(opener))
            self._reset_scan()
            self._stage = "events"

    def _join(self, plain: bytes) -> None:
        """``plain`` after what ``_buf`` holds. An event open for ``PLAIN_PIECE`` bytes or
        more grows in place (a bytearray: it is not copied at each piece, so an endless string
        takes ``max_event_bytes`` once, not twice), and is bytes again once it closes
        (``_read_events``); so do the header keys before and after the events array, which
        are held whole until they end (bytes again once the events begin: ``_read_head``)."""
        buf = self._buf
        if buf.__class__ is bytearray:
            buf += plain
        elif (self._first_open >= 0 and len(buf) - self._first_open >= PLAIN_PIECE
              or self._stage in ("head", "tail") and len(buf) >= PLAIN_PIECE):
            self._buf = bytearray(buf)
            self._buf += plain
        elif not (self._first_open >= 0 and self._stage == "events" and
                  self._straddled(plain)):
            self._buf = buf + plain

    def _straddled(self, plain: bytes) -> bool:
        """``_join`` of a large piece while an event is open (``_first_open``): the event
        that ``plain`` ends (what ``_buf`` holds and the bytes of ``plain`` up to its end) is
        emitted apart, to be handed out with the events after it (``_alone``: as one batch
        would be), and ``plain`` itself becomes ``_buf``, its events from there on
        (``_events_from``), framed already (``_framed``): the piece is not copied after the
        bytes held (on the 10x stripped resnet tile each of its 152 MB was). True when done
        so; False (nothing done) where ``plain`` is small, or does not end that event within
        its first ``_STRADDLE_BRACKETS`` brackets, or nests too deep before (the usual way
        tells)."""
        if len(plain) < _STRADDLE_MIN or self._scan_from != len(self._buf):
            return False
        framing = Framing(plain, 0, self._scan_state, self._scratch)
        depth = framing.depth[:_STRADDLE_BRACKETS]
        closes = np.flatnonzero(depth == 0)
        if not closes.size:
            return False
        close = int(closes[0])
        base = {"object": 2, "array": 1, "jsonl": 0}[self.form]
        if int(depth[:close + 1].max()) + base > self.max_depth:
            return False
        held, end = self._buf, int(framing.brackets[close]) + 1
        alone = Events(checked=True)
        self._emit_one(held + plain[:end], self._first_open, len(held) + end, alone)
        self._after_event = True
        self._buf, self._buf_offset = plain, self._buf_offset + len(held)
        self._scan_from = self._events_from = end
        self._scan_state, self._first_open = (False, 0, False), -1
        self._framed, self._alone = framing.after(close), alone
        return True

    def _skip_blank(self, plain: bytes) -> bool:
        """``plain`` is whitespace where no element is open (before the document, between
        two events): counted, not held or framed (True). What ``_buf`` holds is checked and
        reduced to its comma first (``_drop_gap``)."""
        if self._stage not in ("start", "events", "tail") or not _blank(plain):
            return False
        if self._stage == "tail":
            return self._skip_blank_in_tail(plain)
        if self._stage == "events":
            if self._first_open >= 0 or self._scan_from != len(self._buf):
                return False
            self._drop_gap()
        elif self._buf:
            return False
        self._buf_offset += len(plain)
        return True

    def _outgrows(self, plain: bytes) -> bool:
        """The unfinished element, continued by ``plain``, passes ``max_event_bytes`` before
        it closes."""
        if self._stage != "events" or self._first_open < 0 or \
                self._scan_from != len(self._buf):
            return False
        room = self.max_event_bytes - (len(self._buf) - self._first_open)
        if len(plain) <= room:
            return False
        depth = Framing(plain[:max(room, 0)], 0, self._scan_state).depth
        return not bool((depth == 0).any())

    def _skip_blank_in_tail(self, plain: bytes) -> bool:
        """``_skip_blank`` after the events array, while ``_buf`` holds at most its comma."""
        held = self._buf
        if len(held) > _GAP_KEEP or held.strip(_WHITESPACE) not in (b"", b","):
            return False
        self._buf = held.strip(_WHITESPACE)
        self._buf_offset += len(held) + len(plain) - len(self._buf)
        self._scan_from, self._scan_state = len(self._buf), (False, 0, False)
        return True

    def _consume(self, n: int) -> None:
        self._buf = self._buf[n:]
        self._buf_offset += n

    def _check_depth(self, framing: Framing, base: int, limit_pos: int | None = None) -> int:
        """The offset in ``_buf`` where the nesting first exceeds ``max_depth``, or -1."""
        depth = framing.depth
        if depth.size and int(depth.max()) + base > self.max_depth:
            first = int(np.argmax(depth + base > self.max_depth))
            return int(framing.brackets[first])
        return -1

    def _too_long(self, what: str, pos: int) -> TraceInputError:
        """``what`` runs past ``max_event_bytes`` from ``pos`` in ``_buf``: too much to hold."""
        return TraceInputError(
            f"{what} is longer than {self.max_event_bytes} bytes, the most the reader holds "
            f"(near byte {self._buf_offset + pos}): max_event_bytes (--max-event-bytes) "
            "raises the limit")

    def _too_deep(self, pos: int) -> TraceInputError:
        return TraceInputError(f"nested deeper than {self.max_depth} levels "
                               f"(near byte {self._buf_offset + pos})")

    def _read_head(self, final: bool) -> None:
        """The object form up to the events array: the header keys before it. Each byte is
        framed once (``_scan_from``); where the events key shows, the stretch since the last
        mark (``_head_marks``: a framing state every few bytes) is framed again to tell a key
        from a string's text."""
        buf, scan_from, state = self._buf, self._scan_from, self._scan_state
        if not self._head_marks or scan_from - self._head_marks[-1][0] >= _MARK_EVERY:
            self._head_marks.append((scan_from, state))
        framing = Framing(buf, scan_from, state)
        too_deep = self._check_depth(framing, 0)
        pos = buf.find(_EVENTS_KEY_BYTES, max(0, scan_from - len(_EVENTS_KEY_BYTES) + 1))
        while pos >= 0:
            if 0 <= too_deep < pos:
                raise self._too_deep(too_deep)
            value_at = self._events_value_at(buf, pos, final)
            if value_at == -1:
                return  # the value has not come yet: read again with more bytes
            if value_at >= 0:
                self.header_before = self._header_before(buf[:pos])
                self._consume(value_at + 1)
                if self._buf.__class__ is bytearray:  # a long header (``_join``)
                    self._buf = bytes(self._buf)
                self._reset_scan()
                self._stage = "events"
                return
            pos = buf.find(_EVENTS_KEY_BYTES, pos + 1)
        if too_deep >= 0:
            raise self._too_deep(too_deep)
        closed = np.flatnonzero(framing.depth == 0)
        if closed.size:  # the object ended without the key
            raise self._not_a_trace(buf, int(framing.brackets[closed[0]]))
        if len(buf) > self.max_event_bytes:
            raise self._too_long("the header before the events", 0)
        self._scan_from, self._scan_state = len(buf), framing.end_state

    def _events_value_at(self, buf: bytes, pos: int, final: bool) -> int:
        """Where the events array opens when ``buf[pos:]`` is the events key of the top
        object followed by ``:``; -1 when its value has not come yet, -2 when it is no key."""
        mark, state = self._head_marks[bisect.bisect_right(self._head_marks, (pos, (True,)))
                                        - 1]
        framing = Framing(buf, mark, state)
        quotes = framing.quotes
        k = int(np.searchsorted(quotes, pos))
        opens = k < quotes.size and quotes[k] == pos and (k + state[0]) % 2 == 0
        b = int(np.searchsorted(framing.brackets, pos))
        depth = int(framing.depth[b - 1]) if b else state[1]
        after = buf[pos + len(_EVENTS_KEY_BYTES):].lstrip(_WHITESPACE)
        if not (opens and depth == 1 and after[:1] in (b":", b"")):
            return -2
        if not after:
            return -2 if final else -1
        value = after[1:].lstrip(_WHITESPACE)
        if not value:
            return -2 if final else -1
        if value[:1] != b"[":
            raise TraceInputError(f"not a trace: \"{EVENTS_KEY}\" is not an array")
        return len(buf) - len(value)

    def _not_a_trace(self, buf: bytes, end: int) -> TraceInputError:
        """The object ``buf[:end + 1]`` closed without the events key: what it is instead
        (broken JSON, such as a Python dict's single quotes; an event followed by another on
        its line, JSON Lines written wrong; or JSON that is no trace)."""
        try:
            value, _ = parse_exact(buf[:end + 1])
        except RecursionError:
            return self._too_deep(0)
        except ValueError as e:
            pos = self._buf_offset + (getattr(e, "pos", None) or 0)
            return TraceInputError(f"not valid JSON: {getattr(e, 'msg', e)} (near byte {pos})")
        after = buf[end + 1:].lstrip(_WHITESPACE)
        if isinstance(value, dict) and "ph" in value and after[:1] in (b"{", b","):
            return TraceInputError(
                "not valid JSON Lines: a second value on the line of the first event (near "
                f"byte {self._buf_offset + len(buf) - len(after)}): one event per line")
        return TraceInputError(f"not a trace: JSON object without \"{EVENTS_KEY}\"")

    def _header_before(self, text: bytes) -> dict:
        body = text.strip(_WHITESPACE)[1:].strip(_WHITESPACE)
        if body.endswith(b","):
            body = body[:-1]
        if not body:
            return {}
        try:
            value, _ = parse_exact(b"{" + body + b"}")
        except ValueError as e:
            raise TraceInputError(f"not valid JSON: {e} (in the header keys)") from None
        return value if isinstance(value, dict) else {}

    def _read_events(self, out: Events, final: bool) -> None:
        buf = self._buf
        framing = self._framed or Framing(buf, self._scan_from, self._scan_state, self._scratch)
        self._framed = None
        depth = framing.depth
        brackets = framing.brackets
        base = {"object": 2, "array": 1, "jsonl": 0}[self.form]
        too_deep = self._check_depth(framing, base)
        closes = np.flatnonzero(depth == 0)  # an element ends
        array_end = -1
        below = np.flatnonzero(depth < 0)
        if below.size:
            array_end = int(below[0])
            closes = closes[closes < array_end]
            if self.form == "jsonl":
                raise TraceInputError(f"not valid JSON: unexpected {chr(buf[brackets[array_end]])!r}"
                                      f" (near byte {self._buf_offset + int(brackets[array_end])})")
        if too_deep >= 0:
            closes = closes[brackets[closes] < too_deep]  # the elements that end before it
        if buf.__class__ is bytearray and (closes.size or below.size or too_deep >= 0):
            buf = self._buf = bytes(buf)  # a long event closed (``_join``): bytes again
        alone, self._alone, consumed = self._alone, None, self._events_from  # (``_straddled``)
        if closes.size:
            ends = brackets.take(closes) + 1
            starts = np.empty(closes.size, np.int64)
            starts[0] = self._first_open if self._first_open >= 0 else brackets[0]
            starts[1:] = brackets.take(closes[:-1] + 1)
            self._emit(buf, starts, ends, out if alone is None else alone)
            consumed = int(ends[-1])
            self._after_event = True
        self._events_from = 0
        if alone is not None:
            out.extend(alone)
        if too_deep >= 0:
            self._check_gap(buf, consumed, too_deep, final=False)
            raise self._too_deep(too_deep)
        if array_end >= 0:
            self._end_array(buf, consumed, int(brackets[array_end]))
            return
        # What is left is one unfinished element (or separators): scanned already.
        if closes.size:
            next_open = int(closes[-1]) + 1
            first_open = int(brackets[next_open]) - consumed if next_open < brackets.size else -1
        elif self._first_open < 0 and brackets.size:
            first_open = int(brackets[0]) - consumed
        else:
            first_open = self._first_open
        state = framing.end_state
        if consumed:
            self._consume(consumed)
        self._first_open = first_open
        self._scan_from = len(self._buf)
        self._scan_state = state
        if first_open >= 0 and len(self._buf) - first_open > self.max_event_bytes:
            raise self._too_long("an event", first_open)
        if first_open >= 0 and (final or self._probe_at <= len(self._buf) - first_open <=
                                self.max_event_bytes // 2):
            self._probe_unfinished(first_open, final)
        elif first_open < 0 and len(self._buf) > _GAP_KEEP:
            self._drop_gap()

    def _end_array(self, buf, consumed: int, end_pos: int) -> None:
        """The events array closes at ``end_pos`` (its elements before it are ``consumed``):
        the document is done (the array form) or its tail of header keys follows."""
        if buf[end_pos] != 0x5D:  # "}" at depth 0 of the array
            raise TraceInputError(f"not valid JSON: unexpected '}}' "
                                  f"(near byte {self._buf_offset + end_pos})")
        self._check_gap(buf, consumed, end_pos, final=True)
        self._consume(end_pos + 1)
        self._reset_scan()
        if self.form == "array":
            self._document_done = True
            self._stage = "done"
            rest = self._buf
            self._buf = b""
            if rest.strip():
                raise TraceInputError("not valid JSON: trailing garbage after the document "
                                      f"(near byte {self._buf_offset})")
        else:
            self._stage = "tail"

    def _probe_unfinished(self, first_open: int, final: bool) -> None:
        """An element still open at the end of the input, or grown large: a broken one (a
        stray quote makes the rest of the file one long string) is an error where it breaks,
        not a truncation; a merely unfinished one fails only at its end."""
        self._probe_at = max(self._probe_at, 2 * (len(self._buf) - first_open))
        text = memoryview(self._buf)[first_open:]  # no copy of what may be large
        try:
            parse_exact(text)
        except RecursionError:
            raise self._too_deep(first_open) from None
        except ValueError as e:
            pos = getattr(e, "pos", None)
            message = getattr(e, "msg", "")
            # A string running to the end says nothing (its start is where it was opened).
            if pos is not None and pos < _rstripped_length(self._buf, first_open) - 1 and \
                    not message.startswith("Unterminated string"):
                raise TraceInputError(f"not valid JSON: {getattr(e, 'msg', e)} "
                                      f"(near byte {self._buf_offset + first_open + pos})") \
                    from None

    def _drop_gap(self) -> None:
        """``_buf`` holds only what lies after the last event, no element opened: separators,
        checked now (garbage is an error here) and dropped but for the comma."""
        gap = self._buf
        self._check_gap(gap, 0, len(gap), final=False)
        keep = b"," if gap.strip(_WHITESPACE) else b""
        self._buf_offset += len(gap) - len(keep)
        self._buf = keep
        self._scan_from = len(keep)

    def _reset_scan(self) -> None:
        self._scan_from = 0
        self._scan_state = (False, 0, False)
        self._first_open = -1

    def _check_gap(self, buf: bytes, start: int, end: int, final: bool) -> None:
        """Only separators may lie between the last event and ``end`` (a ``]`` when
        ``final``, where no comma may come either)."""
        gap = buf[start:end]
        stripped = gap.strip(_WHITESPACE)
        if not final and self.form != "jsonl" and stripped.startswith(b","):
            stripped = stripped[1:].strip(_WHITESPACE)
        if stripped and (final or not stripped.startswith((b"{", b"["))):
            where = start + gap.find(stripped[:1])
            raise self._unexpected(stripped, where)

    def _unexpected(self, text: bytes, where: int) -> TraceInputError:
        if text.startswith(b","):
            return TraceInputError(f"not valid JSON: unexpected ',' "
                                   f"(near byte {self._buf_offset + where})")
        return TraceInputError("not a trace: an element of the events array is not an "
                               f"object (near byte {self._buf_offset + where})")

    def _emit_one(self, buf: bytes, start: int, end: int, out: Events) -> None:
        """``_emit`` of the one event ``buf[start:end]`` (``_straddled``'s): for the engine
        alone (``slim``), where the separators before it are right and msgspec reads it with
        the engine's fields, as ``_emit_slim`` reads a stretch of one event, without its
        numpy passes (on the 10x stripped resnet tile, 309 such events: ``boundaries``
        10,954.3 -> 10,929.7 M instructions); anything else as ``_emit`` does (errors told
        alike)."""
        if self.slim and self.form != "jsonl" and buf[start] == 0x7B and \
                end - start <= self.max_event_bytes and \
                buf[self._events_from:start].strip(_WHITESPACE) == \
                (b"," if self._after_event else b""):
            got, checked = self._decode_stretch(buf, start, end, False, False)
            if got is not None:
                out.events.extend(got)
                if not checked:
                    out.checked = False
                if self.keep_raws:
                    out.raws.append(buf[start:end])
                return
        self._emit(buf, np.array([start], np.int64), np.array([end], np.int64), out)

    def _emit(self, buf: bytes, starts: np.ndarray, ends: np.ndarray, out: Events) -> None:
        """Parse the framed elements ``buf[starts[i]:ends[i]]`` into ``out``."""
        if not bool((np.frombuffer(buf, np.uint8).take(starts) == 123).all()):
            bad = int(starts[np.argmax(np.frombuffer(buf, np.uint8)[starts] != 123)])
            raise TraceInputError("not a trace: an element of the events array is not an "
                                  f"object (near byte {self._buf_offset + bad})")
        lengths = ends - starts
        if int(lengths.max()) > self.max_event_bytes:  # however it came, in one chunk or many
            raise self._too_long("an event", int(starts[np.argmax(lengths >
                                                                  self.max_event_bytes)]))
        runs = _frame_runs(buf, starts, ends)
        if self.slim and self.form != "jsonl" and self._emit_slim(buf, starts, ends, runs, out):
            return
        starts_l = starts.tolist()
        ends_l = ends.tolist()
        # Separators: between two events only whitespace and (array) one comma.
        gaps_ok = self._gaps_ok(buf, starts, ends)
        if not gaps_ok:
            self._check_gaps_slowly(buf, starts_l, ends_l)
        exact = self._needs_exact(buf, starts)
        base = len(out.events)
        events, raws = self._parse_full(buf, starts_l, ends_l, exact, gaps_ok)
        out.checked = False
        out.events.extend(events)
        if self.keep_raws:
            out.raws.extend(raws)
        out.frame_runs.extend(FrameRun(base + i, base + j, events=events[i:j]) for i, j in runs)

    def _emit_slim(self, buf: bytes, starts: np.ndarray, ends: np.ndarray, runs: list,
                   out: Events) -> bool:
        """``_emit`` for the engine alone (``slim``): the events between the frame runs with
        the fields the engine reads, each frame run read in bulk when it can be
        (``_frame_columns``); whatever the fast path refuses is parsed in full, as ever.
        (msgspec keeps integers of any size exact: no digit-run search unless it refuses.)

        The stretches are decoded first, each as one JSON array (``_decode_stretch``): what
        msgspec accepts holds valid separators, so only those between the stretches are
        looked at (``_joints_ok``); where a stretch was refused, every separator is checked
        (``_gaps_ok``). False, with nothing emitted: a separator is wrong (``_emit`` says
        which)."""
        n = starts.size
        # Offsets as ints for the raws; else the arrays (a few offsets read).
        starts_l, ends_l = (starts.tolist(), ends.tolist()) \
            if self.keep_raws and _native is None else (starts, ends)
        stretches, at = [], 0
        for i, j in [*runs, (n, n)]:
            if at < i:
                stretches.append((at, i, False))
            if i < j:
                stretches.append((i, j, True))
            at = j
        # ASCII throughout (as Kineto writes): no stretch need be checked as UTF-8 again.
        utf8 = _ascii(buf, int(starts_l[0]), int(ends_l[-1]))
        decoded = [self._decode_stretch(buf, starts_l[i], ends_l[j - 1], run, utf8)
                   for i, j, run in stretches]
        if not (self._joints_ok(buf, starts_l, ends_l, stretches) and
                all(got is not None for got, _ in decoded)):
            if not self._gaps_ok(buf, starts, ends):
                return False
        base = len(out.events)
        for (i, j, run), (got, checked) in zip(stretches, decoded):
            if not checked:
                out.checked = False
            if got is None:  # something odd: in full, where errors are told precisely
                exact = self._needs_exact(buf, starts[i:j])
                got, raws = self._parse_full(buf, starts[i:j].tolist(), ends[i:j].tolist(),
                                             exact, True)
            else:
                raws = _raws(buf, starts_l[i:j], ends_l[i:j]) if self.keep_raws else None
            if got.__class__ is tuple:  # a frame run read in bulk
                text, (run_starts, run_ends, frames, *holds) = got
                out.events.extend([None] * (j - i))
                out.frame_runs.append(FrameRun(base + i, base + j, run_starts, run_ends, text,
                                               frames=frames,
                                               text_holds=holds[0] if holds else None))
            else:
                out.events.extend(got)
                if run:
                    out.frame_runs.append(FrameRun(base + i, base + j, events=got))
            if self.keep_raws:
                out.raws.extend(raws)
        return True

    def _decode_stretch(self, buf: bytes, start: int, end: int, run: bool, utf8: bool):
        """The events of ``buf[start:end]`` with the fields the engine reads (a list, one
        msgspec call, or read in place by ``_native.kineto_events`` where they are written
        as Kineto writes them: the same structs), or, for a frame run, (its bytes as an
        array, ``_frame_columns``); None where msgspec refuses them. With it, whether they
        are checked (``Events.checked``). ``utf8``: the bytes are known to be UTF-8 (else
        they are checked here)."""
        if utf8 and _native is not None:
            if run:
                columns = _frame_items(buf, start, end)
                if columns is not None:
                    return (_RunText(buf, start, end), columns), True
            elif self.lazy_dims:  # in place, as msgspec reads them (``_native.kineto_events``)
                events = _native.kineto_events(buf, start, end, SlimEvent, msgspec.Raw)
                if events is not None:
                    return events, True
        text = _array_of(buf, start, end)
        if not (utf8 or _utf8(text)):
            return None, False
        if run:
            columns = _frame_columns(text)
            if columns is not None:
                return (text, columns), True
        checked, as_given = _SLIM_DECODERS[self.lazy_dims]
        try:
            return checked.decode(text), True
        except msgspec.ValidationError:  # a field of another type: the engine tells
            pass
        except msgspec.DecodeError:
            return None, False
        try:
            return as_given.decode(text), False
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None, False

    def _joints_ok(self, buf: bytes, starts: list, ends: list, stretches: list) -> bool:
        """The separators before each stretch of events (``_emit_slim``) are whitespace and
        (array) one comma, none before the array's first event."""
        for i, _, _ in stretches:
            gap = buf[ends[i - 1] if i else self._events_from:starts[i]].strip(_WHITESPACE)
            if gap != (b"," if i or self._after_event else b""):
                return False
        return True

    def _parse_full(self, buf: bytes, starts_l: list, ends_l: list, exact, gaps_ok: bool):
        """Every field of the events ``buf[starts_l[k]:ends_l[k]]``: (events, raws), raws
        None unless kept or needed."""
        events = raws = None
        if exact is None and gaps_ok and self.form != "jsonl":
            try:  # the events and their separators are an array's items: one parse
                events = orjson.loads(_array_of(buf, starts_l[0], ends_l[-1]))
            except orjson.JSONDecodeError:
                pass  # one of them needs a closer look: one by one
        if events is None or self.keep_raws:
            raws = [buf[s:e] for s, e in zip(starts_l, ends_l)]
        if events is None and exact is None:
            try:
                events = list(map(orjson.loads, raws))
            except orjson.JSONDecodeError:
                pass
        if events is None:
            events = []
            loads = orjson.loads
            for i, raw in enumerate(raws):
                if exact is not None and exact[i]:
                    event, raws[i] = self._parse_slowly(raw, starts_l[i])
                else:
                    try:
                        event = loads(raw)
                    except orjson.JSONDecodeError:
                        event, raws[i] = self._parse_slowly(raw, starts_l[i])
                events.append(event)
        return events, raws

    def _gaps_ok(self, buf: bytes, starts: np.ndarray, ends: np.ndarray) -> bool:
        """Vectorized: only whitespace between events and (not JSON Lines) exactly one comma
        before each event but the first of the array."""
        a = np.frombuffer(buf, np.uint8)
        n = starts.size
        lengths = np.empty(n, np.int64)
        lengths[0] = starts[0] - self._events_from
        lengths[1:] = starts[1:] - ends[:-1]
        total = int(lengths.sum())
        if total > _GAP_KEEP and total > 8 * n:  # long runs of whitespace: no array per byte
            self._check_gaps_slowly(buf, starts.tolist(), ends.tolist())
            return True
        commas_due = n - 1 + (1 if self._after_event else 0)
        if self.form == "jsonl":
            commas_due = 0
        if total == 0:
            return commas_due == 0
        gap_of = np.repeat(np.arange(n), lengths)
        first = np.empty(n, np.int64)
        first[0] = self._events_from
        first[1:] = ends[:-1]
        positions = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths) \
            + np.repeat(first, lengths)
        gap = a[positions]
        comma = gap == 44
        blank = (gap == 32) | (gap == 10) | (gap == 13) | (gap == 9)
        if not bool((comma | blank).all()):
            return False
        per_gap = np.bincount(gap_of[comma], minlength=n)
        want = np.ones(n, np.int64) if self.form != "jsonl" else np.zeros(n, np.int64)
        if self.form != "jsonl" and not self._after_event:
            want[0] = 0
        return bool((per_gap == want).all())

    def _check_gaps_slowly(self, buf: bytes, starts: list, ends: list) -> None:
        """Find and report the first bad separator (``_gaps_ok`` said there is one)."""
        prev = self._events_from
        comma_due = self._after_event and self.form != "jsonl"
        for s, e in zip(starts, ends):
            gap = buf[prev:s]
            stripped = gap.strip(_WHITESPACE)
            if comma_due and stripped.startswith(b","):
                stripped = stripped[1:].strip(_WHITESPACE)
            elif comma_due or stripped:
                where = prev + len(gap) - len(gap.lstrip(_WHITESPACE))
                if comma_due and not stripped:
                    raise TraceInputError(f"not valid JSON: expected ',' between events "
                                          f"(near byte {self._buf_offset + s})")
                raise self._unexpected(stripped, where)
            if stripped:
                raise self._unexpected(stripped, prev + gap.find(stripped[:1]))
            comma_due = self.form != "jsonl"
            prev = e

    def _needs_exact(self, buf: bytes, starts: np.ndarray):
        """A bool per event: it holds an integer of 19+ digits (parsed by the standard
        library, exactly); a long fraction (``0.0014388489208633094``) is no reason."""
        digits = buf.translate(_DIGITS_ONLY)
        at = digits.find(_DIGIT_RUN)
        if at < 0:
            return None
        exact = None
        while at >= 0:
            end = at + len(_DIGIT_RUN)
            while end < len(digits) and digits[end] == 0x30:
                end += 1
            if at == 0 or buf[at - 1] not in b".eE":
                i = int(np.searchsorted(starts, at, side="right")) - 1
                if 0 <= i < starts.size:
                    if exact is None:
                        exact = np.zeros(starts.size, bool)
                    exact[i] = True
            at = digits.find(_DIGIT_RUN, end)
        return exact

    def _parse_slowly(self, raw: bytes, at: int):
        """An event orjson refused or would change; returns (event, original bytes or None)."""
        try:
            event, changed = parse_exact(raw)
        except RecursionError:
            raise self._too_deep(at) from None
        except ValueError as e:
            pos = getattr(e, "pos", 0) or 0
            message = getattr(e, "msg", str(e))
            raise TraceInputError(f"not valid JSON: {message} "
                                  f"(near byte {self._buf_offset + at + pos})") from None
        if type(event) is not dict:
            raise TraceInputError("not a trace: an element of the events array is "
                                  f"{type(event).__name__}")
        return event, (None if changed else raw)

    def _read_tail(self, final: bool) -> None:
        """After the events array: ``, "key": value ... }``; the bytes are framed once each
        (``_scan_from``), whitespace before the comma is dropped."""
        lead = 0
        if self._buf[:1].isspace():  # (``lstrip`` copies what it keeps: not at each piece)
            lead = len(self._buf) - len(self._buf.lstrip(_WHITESPACE))
        if lead:
            self._consume(lead)
            self._scan_from = max(0, self._scan_from - lead)
        buf = self._buf
        framing = Framing(buf, self._scan_from, self._scan_state)
        too_deep = self._check_depth(framing, 1)
        if too_deep >= 0:
            raise self._too_deep(too_deep)
        closes = np.flatnonzero(framing.depth < 0)
        if not closes.size:
            if len(buf) > self.max_event_bytes:
                raise self._too_long("the header after the events", 0)
            self._scan_from, self._scan_state = len(buf), framing.end_state
            return
        end = int(framing.brackets[closes[0]])
        if buf[end] != 0x7D:
            raise TraceInputError(f"not valid JSON: unexpected ']' "
                                  f"(near byte {self._buf_offset + end})")
        self.header_after = self._header_after(buf[:end].strip(_WHITESPACE))
        trailing = buf[end + 1:]
        self._consume(len(buf))
        self._document_done = True
        self._stage = "done"
        if trailing.strip():
            raise TraceInputError("not valid JSON: trailing garbage after the document "
                                  f"(near byte {self._buf_offset - len(trailing)})")

    def _header_after(self, rest: bytes) -> dict:
        """The header keys after the events (``rest``: from the comma after the array to the
        document's closing brace); a second events array there is an error, not dropped."""
        if not rest:
            return {}
        if not rest.startswith(b","):
            raise TraceInputError("not valid JSON: expected ',' or '}' after the events "
                                  f"(near byte {self._buf_offset})")
        try:
            value, _ = parse_exact(b"{" + rest[1:] + b"}")
        except ValueError as e:
            raise TraceInputError(f"not valid JSON: {e} (in the header keys after the "
                                  "events)") from None
        if EVENTS_KEY in value:
            raise TraceInputError(f"not a trace: a second \"{EVENTS_KEY}\" array after the "
                                  f"first (near byte {self._buf_offset}): its events would be "
                                  "lost")
        return value

    def _end_of_input(self) -> None:
        if self.form == "jsonl":
            rest = self._buf.strip()
            if rest:  # a last line cut short
                self.complete = False
                self.stop_reason = ("input ended before the end of the JSON document "
                                    f"(after {self.bytes_decoded} bytes)")
                return
            self._document_done = True
        if self._document_done:
            if self._decompressor.truncated:
                self.complete = False
                self.stop_reason = "compressed stream ended before its end-of-stream marker"
            else:
                self.complete = True
            return
        self.complete = False
        if self._decompressor.truncated and self.bytes_decoded == 0:
            raise TraceInputError("corrupt or empty compressed stream")
        self.stop_reason = ("input ended before the end of the JSON document "
                            f"(after {self.bytes_decoded} bytes)")
