"""``split --workers N`` (``stream_split/parallel.py``): one trace dealt to N processes gives
the pieces and the manifest of ``--workers 1``: the same events, in the same order, in every
piece (decompressed bytes compared), on every generated scenario and every shared trace.

The ranges are made small here (``RANGE_BYTES``) so that small traces are dealt in many, and
every file takes the parallel path (``PARALLEL_MIN_BYTES``); a spy on ``ParallelSplit.finish``
checks that it did (a run that fell back to one stream would compare equal too)."""
from __future__ import annotations

import gzip
import io
import json
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

import stream_split
import stream_split.native as native_module
import stream_split.parallel as parallel
from stream_split.run import _parts
from stream_split.core.records import METADATA
from stream_split.decode import Events, FrameRun
from stream_split.testing.generate import SCENARIOS, generate, render, write_trace

from conftest import (PROCESS_WAIT, check_pieces, large_ones_slow, needs_shared,
                      shared_trace_paths, start_split, wait_for_staging)


@pytest.fixture
def small_ranges(monkeypatch):
    """Ranges of 16 KiB, every file dealt; returns the list of runs that took the path."""
    monkeypatch.setattr(parallel, "RANGE_BYTES", 16 << 10)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    finished = []
    finish = parallel.ParallelSplit.finish

    def spy(self):
        finished.append(self.count)
        finish(self)
    monkeypatch.setattr(parallel.ParallelSplit, "finish", spy)
    return finished


def folder_contents(out: Path) -> dict:
    """{file: decompressed bytes} of a split's folder (pieces and manifest)."""
    contents = {}
    for path in sorted(out.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            contents[str(path.relative_to(out))] = (gzip.decompress(data)
                                                    if path.suffix == ".gz" else data)
    return contents


def manifest_without_input(contents: dict) -> dict:
    manifest = json.loads(contents.pop("manifest.json"))
    manifest.pop("input")
    return manifest


def assert_workers_agree(trace, tmp_path, finished, **options) -> None:
    one = stream_split.split(str(trace), tmp_path / "one", workers=1, **options)
    two = stream_split.split(str(trace), tmp_path / "two", workers=2, **options)
    # a trace cut short is split as one stream (its error and stop reason are that path's)
    assert finished == ([2] if one["complete"] else []), "the parallel path was not taken"
    first, second = folder_contents(tmp_path / "one"), folder_contents(tmp_path / "two")
    assert manifest_without_input(first) == manifest_without_input(second)
    assert first.keys() == second.keys()
    for name in first:
        assert first[name] == second[name], name
    assert one["counts"] == two["counts"]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_two_workers_write_what_one_writes_on_every_scenario(scenario, tmp_path, small_ranges):
    trace = tmp_path / f"{scenario}.json.gz"
    write_trace(generate(scenario, 3), str(trace))
    assert_workers_agree(trace, tmp_path, small_ranges)


@pytest.mark.parametrize("form", ["object", "array"])
def test_spilled_events_keep_their_order_across_workers(form, tmp_path, small_ranges):
    """With a small ``pending_limit`` the engine spills; the events it hands out later come in
    the same order however the input was dealt (``run._parts``)."""
    trace = tmp_path / "t.json"
    trace.write_text(render(generate("training", 5, steps=12), form))
    assert_workers_agree(trace, tmp_path, small_ranges, pending_limit=50)


def test_selected_plain_pieces_agree(tmp_path, small_ranges):
    trace = tmp_path / "t.json.gz"
    write_trace(generate("noisy_training", 2, steps=10), str(trace))
    assert_workers_agree(trace, tmp_path, small_ranges, iterations="2-5", compress=False)


@given(raws=st.lists(st.binary(min_size=1, max_size=5), max_size=4), separated=st.booleans())
def test_a_segment_is_its_events_joined_as_a_piece_holds_them(raws, separated):
    """``write.segment_text``: the events' bytes joined by ``,\\n``, one more before them
    when the segment is ``separated`` (what the piece holds before it)."""
    from stream_split.write import segment_text
    assert segment_text(raws, separated) == (b",\n" if separated else b"") + b",\n".join(raws)


def test_a_cut_inside_an_event_falls_back_to_one_stream(tmp_path, small_ranges):
    """Events whose ``args`` hold objects on lines of their own: some cuts (``},`` before a
    line break) fall inside an event; the range is not a run of whole events and the trace is
    split as one stream, with the same output."""
    events = []
    for k in range(3000):
        events.append('{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, '
                      f'"ts": {k * 10}, "dur": 5, "args": {{"list": [{{"a": {k}}},\n'
                      f'{{"b": {k}}}]}}}}')
    trace = tmp_path / "nested.json"
    trace.write_text('{"traceEvents": [\n' + ",\n".join(events) + "\n]}\n")
    one = stream_split.split(str(trace), tmp_path / "one", workers=1)
    two = stream_split.split(str(trace), tmp_path / "two", workers=2)
    assert small_ranges == [], "a cut inside an event was taken for an event boundary"
    assert folder_contents(tmp_path / "one").keys() == folder_contents(tmp_path / "two").keys()
    assert one["counts"] == two["counts"]


@needs_shared
@pytest.mark.parametrize("trace", large_ones_slow(shared_trace_paths()))
def test_two_workers_write_what_one_writes_on_every_shared_trace(trace, tmp_path, small_ranges):
    assert_workers_agree(trace, tmp_path, small_ranges)


def test_workers_started_by_a_fork_server_write_what_one_writes(tmp_path, small_ranges,
                                                                monkeypatch):
    """A split whose process has threads starts its workers and reader from a fork server:
    the shared slots go to them as a file descriptor (``_Slots.__reduce__``)."""
    monkeypatch.setattr(parallel, "_context", lambda: multiprocessing.get_context("forkserver"))
    trace = tmp_path / "t.json.gz"
    write_trace(generate("training", 4), str(trace))
    assert_workers_agree(trace, tmp_path, small_ranges)


def test_slots_hold_what_fits_and_hand_back_what_does_not():
    """A range's slot (``_Slots``) holds its parts one after the other (their length is sent
    instead of them); what is larger than a slot is sent itself; a pickle reads back where
    it lies."""
    slots = parallel._Slots(workers=2, ahead=2, size=64)
    try:
        held = slots.put(5, [b"[", memoryview(b",abc")[1:], b"]"])
        assert held == 5 and slots.get(5, held) == b"[abc]"
        big = slots.put(6, [b"x" * 40, b"y" * 40])
        assert big == b"x" * 40 + b"y" * 40 and slots.get(6, big) == big
        # range 5 is worker 1's third (its first slot, as range 1's); range 0 worker 0's first
        made = slots.put(0, [json.dumps([1, 2]).encode()])
        assert slots.get(5, held) == b"[abc]", "another range's slot was written"
        assert slots.get(0, made) == b"[1, 2]"
        pickled = parallel.pickle.dumps({"a": (1, 2)})
        assert slots.unpickle(1, slots.put(1, [pickled])) == {"a": (1, 2)}
    finally:
        slots.close()


def _shared_slots_open() -> list:
    """This process's open files that are the slots of a split (``_Slots``)."""
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the listing's own descriptor, closed since
            pass
    return [link for link in links if "stream-split-ranges" in link]


def _killed_at_the_second_range(decode):
    def decode_or_die(self, r, document, place):
        if r == 1:
            os._exit(3)  # as a worker killed (by the OOM killer, say) would end
        return decode(self, r, document, place)
    return decode_or_die


@pytest.mark.skipif(not os.path.exists("/proc/self/fd"), reason="needs /proc")
def test_a_worker_that_dies_falls_back_leaving_no_process_and_no_shared_memory(
        tmp_path, small_ranges, monkeypatch):
    """A worker that ends mid-run: the trace is split as one stream (the same output), the
    other processes are stopped and the slots freed."""
    monkeypatch.setattr(parallel, "_context", lambda: multiprocessing.get_context("fork"))
    monkeypatch.setattr(parallel._Worker, "decode",
                        _killed_at_the_second_range(parallel._Worker.decode))
    trace = tmp_path / "t.json"
    trace.write_text(render(generate("training", 4), "object"))
    one = stream_split.split(str(trace), tmp_path / "one", workers=1)
    two = stream_split.split(str(trace), tmp_path / "two", workers=2)
    assert small_ranges == [], "the parallel path went on without a worker"
    assert folder_contents(tmp_path / "one").keys() == folder_contents(tmp_path / "two").keys()
    assert one["counts"] == two["counts"]
    assert multiprocessing.active_children() == []
    assert _shared_slots_open() == []


@pytest.mark.skipif(not os.path.exists("/proc/self/fd"), reason="needs /proc")
def test_a_process_that_cannot_start_falls_back_leaving_no_process_and_no_shared_memory(
        tmp_path, small_ranges, monkeypatch):
    """No memory to fork the reader (the last process started): the workers started are
    stopped, the slots freed, and the trace split as one stream."""
    start = multiprocessing.process.BaseProcess.start

    def start_but_the_reader(self):
        if self.name == "stream-split reader":
            raise OSError(12, "Cannot allocate memory")
        start(self)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", start_but_the_reader)
    trace = tmp_path / "t.json"
    trace.write_text(render(generate("training", 2), "object"))
    one = stream_split.split(str(trace), tmp_path / "one", workers=1)
    two = stream_split.split(str(trace), tmp_path / "two", workers=2)
    assert small_ranges == []
    assert folder_contents(tmp_path / "one") == folder_contents(tmp_path / "two")
    assert one["counts"] == two["counts"]
    assert multiprocessing.active_children() == []
    assert _shared_slots_open() == []


def _children_of(pid: int, count: int) -> list[str]:
    """The child processes of ``pid``, once there are ``count``."""
    deadline = time.monotonic() + PROCESS_WAIT
    while time.monotonic() < deadline:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if len(children) >= count:
            return children
        time.sleep(0.01)
    raise AssertionError(f"no {count} child processes")


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs /proc")
def test_sigterm_stops_a_split_with_workers_leaving_no_process_and_no_shared_memory(
        long_trace, tmp_path):
    """SIGTERM to a ``split --workers 2``: a truthful manifest of what was read, its reader
    and workers gone, and nothing of it left in /dev/shm (its slots have no name there)."""
    shm_before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    proc = start_split(long_trace, tmp_path / "d", "--workers", "2")
    wait_for_staging(tmp_path, "d", proc)
    children = _children_of(proc.pid, 3)  # its reader and two workers
    time.sleep(0.1)  # into the run
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=PROCESS_WAIT)
    # (a fast machine may have finished the split before the signal came)
    assert proc.returncode in (0, 128 + signal.SIGTERM), err.decode()
    assert "Traceback" not in err.decode()
    check_pieces(tmp_path / "d", long_trace.read_bytes())
    for child in children:
        assert not os.path.exists(f"/proc/{child}"), "a process of the split ran on"
    shm_after = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    assert not [name for name in shm_after - shm_before if "stream-split" in name]


def test_parts_end_every_so_many_events_whatever_the_batches():
    """The engine hands out its decisions where the parts end: at the same events however the
    input was cut into batches, a run of frames cut at a part's edge."""
    def batch(n, run=None):
        runs = [FrameRun(*run, events=[{"k": k} for k in range(run[1] - run[0])])] if run else []
        return Events([{"k": k} for k in range(n)], list(range(n)), runs)
    parts = list(_parts([batch(5), batch(7, (2, 7)), batch(1)], size=4))
    assert [len(p) for p in parts] == [4, 4, 4, 1]
    assert [(r.i, r.j) for r in parts[1].frame_runs] == [(3, 4)]
    assert [(r.i, r.j) for r in parts[2].frame_runs] == [(0, 4)]
    assert parts[3].frame_runs == []
    assert [raw for p in parts for raw in p.raws] == [*range(5), *range(7), 0]


def _batch_facts(batch: Events) -> tuple:
    """What a batch holds, comparable: its events, raws, whether checked, and its frame runs
    (their bounds and times)."""
    runs = [(run.i, run.j, None if run.starts is None else run.starts.tolist(),
             None if run.ends is None else run.ends.tolist(), run._text)
            for run in batch.frame_runs]
    return batch.events, batch.raws, batch.checked, runs


@pytest.mark.parametrize("form", ["object", "array"])
def test_a_range_told_where_its_events_open_decodes_as_one_read_whole(form, monkeypatch):
    """A range after the first is decoded told its opener (``TraceDecoder.events_open_after``,
    the head not framed): the same batch, frame runs included, as the same document read
    without being told; a document that does not begin with the opener is read as any
    other."""
    text = render(generate("training", 4), form=form).encode()
    ranges = list(parallel.placed(parallel.cut_ranges(io.BytesIO(text), 64 << 10)))
    assert len(ranges) > 2
    read_head = parallel.TraceDecoder._read_head
    for r, (piece, place) in enumerate(ranges[1:], 1):
        document = b"".join(parallel.range_document(piece, place, form))
        untold = parallel.TraceDecoder(max_event_bytes=1 << 20)
        untold.slim = untold.lazy_dims = True
        whole = Events()
        whole.extend(untold.receive_data(document))
        whole.extend(untold.receive_data(b""))
        assert untold.complete

        def unread(self, final):
            raise AssertionError("the head was framed")
        monkeypatch.setattr(parallel.TraceDecoder, "_read_head", unread)
        told, ending = parallel.decode_range(document, place, form, 1 << 20)
        monkeypatch.setattr(parallel.TraceDecoder, "_read_head", read_head)
        assert _batch_facts(told) == _batch_facts(whole), r
        assert (ending is None) == (place == "middle")
    decoder = parallel.TraceDecoder()
    decoder.events_open_after("object", b'{"traceEvents": [')
    got = decoder.receive_data(b'{"other": 1, "traceEvents": [{"ph": "i", "ts": 1}]}')
    decoder.receive_data(b"")
    assert decoder.complete and decoder.header_before == {"other": 1}
    assert [event["ph"] for event in got.events] == ["i"]


def test_events_phases_read_in_bulk_are_those_read_one_by_one():
    """``parallel._phases`` (``getattr`` in C over a checked batch's slim structs) gives each
    event's ``ph`` as ``get`` reads it one by one, None for a frame read in bulk; an unchecked
    batch's dicts too."""
    from stream_split.core.validate import SlimEvent
    slim = [SlimEvent(ph="M", ts=1), None, SlimEvent(ts=2), SlimEvent(ph="X", ts=3)]
    assert parallel._phases(Events(slim, checked=True)) == ["M", None, None, "X"]
    mixed = [{"ph": "M"}, None, {"ts": 2}, SlimEvent(ph="X", ts=3)]
    assert parallel._phases(Events(mixed)) == ["M", None, None, "X"]
    assert parallel._phases(Events(slim, checked=True)) == [
        None if event is None else event.get("ph") for event in slim]


class _Order:
    """What ``cut_segments`` asks a ``write.PieceWriter`` (every owner wanted; a piece's
    first segment not separated)."""

    def __init__(self):
        self.started = set()

    def wants(self, owner: int) -> bool:
        return True

    def separated(self, owner: int) -> bool:
        separated = owner in self.started
        self.started.add(owner)
        return separated


@given(st.lists(st.one_of(
    st.tuples(st.integers(-1, 4), st.integers(0, 3), st.integers(0, 9)).map(
        lambda t: (t[0], t[1] << parallel.RANGE_SHIFT | t[2])),
    st.binary(max_size=4).map(lambda raw: (METADATA, raw))), max_size=40))
def test_pairs_cut_natively_are_cut_as_in_python(pairs):
    """``cut_segments`` by ``_native.pair_columns`` and by its Python fallback: the same
    metadata pairs and segments, in order."""
    def cut(native):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(stream_split.decode, "_native", native)
            metadata, segments = parallel.cut_segments(list(pairs), _Order())
        return metadata, [(owner, r, separated, indices.tolist())
                          for owner, r, separated, indices in segments]
    assert cut(native_module.BUILT) == cut(None)


@pytest.mark.skipif(native_module.BUILT is None, reason="stream_split._native is not built")
def test_pair_columns_refuses_what_it_cannot_read():
    """None (the Python fallback reads them, or raises as it does) for pairs that are not
    ``(int, int >= 0)`` or ``(METADATA, bytes)`` within 64 bits."""
    columns = native_module.BUILT.pair_columns
    for pairs in ([(1, b"x")], [(1 << 70, 2)], [(1, -1)], [(1, 2.0)], [(1, 2, 3)], [[1, 2]]):
        assert columns(pairs, METADATA) is None
    assert columns([], METADATA) == bytearray()


@pytest.mark.parametrize("scenario", ["training", "serving_phases", "diffusion"])
def test_events_read_back_as_rows_hold_the_slim_events_fields(scenario):
    """What the engine reads of a range (``decode_for_engine`` then ``batch_of``: a checked
    event as an ``EventRow``) has each slim event's fields, of the same types and values,
    and ``get`` reads them as the slim event's does."""
    from msgspec.structs import fields
    document = render(generate(scenario), "object").encode()
    batch, _ = parallel.decode_range(document, "only", "object", 1 << 30)
    decoded, _ = parallel.decode_for_engine(document, "only", "object", 1 << 30)
    events = parallel.DecodedRanges(batch_reader_face()).batch_of(0, decoded).events
    assert len(events) == len(batch.events) and batch.checked
    names = [f.name for f in fields(parallel.SlimEvent)]
    assert [f.name for f in fields(parallel.EventRow)] == names
    for slim, row in zip(batch.events, events):
        if slim is None:
            assert row is None
            continue
        for name in names:
            value = getattr(row, name)
            assert value == getattr(slim, name) and type(value) is type(getattr(slim, name))
            assert row.get(name) == slim.get(name)


def batch_reader_face():
    """What ``DecodedRanges`` reads of an opened trace."""
    class Opened:
        form, compression, header_before = "object", "plain", {}
    return Opened()
