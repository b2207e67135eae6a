"""How ``PieceWriter`` puts a piece on disk: events compressed while the input is read, each
piece one gzip member that gzip, zcat and zlib read whole, holding the input's exact event
bytes, with the metadata before them and the header keys around them."""
import gzip
import json
import os
import random
import subprocess
import tracemalloc
import zlib
from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

import stream_split.decode as decode_module

from stream_split.core.records import KIND_IDLE, KIND_ITERATION, METADATA, OUTSIDE, IterationRecord
from stream_split.write import (COPY_CHUNK, PACK_PIECE_BYTES, SPOOL_TASK_BYTES,
                                STORED_PACK_BYTES, PieceWriter)
from conftest import decoder_passes

HEADER_BEFORE = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 3}}
HEADER_AFTER = {"traceName": "t.json", "displayTimeUnit": "ms"}
META = [b'{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}}']


def _event(owner: int, n: int, rng) -> bytes:
    # original bytes as a profiler writes them: spaces, a float, an escape, random padding
    pad = "".join(rng.choice("abcdef0123") for _ in range(rng.randrange(0, 300)))
    return (f'{{"ph": "X", "cat": "cpu_op", "name": "op\\"{owner}", "ts": {n}.125, '
            f'"dur": 1, "args": {{"pad": "{pad}"}}}}').encode()


def _write(tmp_path, batches, *, compress: bool, max_open: int = 16, level: int = 1):
    out = tmp_path / ("gz" if compress else "plain")
    out.mkdir()
    writer = PieceWriter(str(out), compress=compress, compresslevel=level, max_open=max_open)
    for batch in batches:
        writer.add_many(batch)
    owners = sorted({owner for batch in batches for owner, _ in batch} - {METADATA, OUTSIDE})
    records = [IterationRecord(index=owner, start_ts=0.0, end_ts=1.0) for owner in owners]
    files = writer.finish(records, HEADER_BEFORE, HEADER_AFTER)
    assert not os.path.exists(out / ".spool")
    return out, files


def _interleaved(owners: int, events: int, seed: int = 1):
    """Batches of events of ``owners`` pieces in an order that keeps every piece's spool
    segment being closed and reopened, plus metadata at the end (as Kineto writes it)."""
    rng = random.Random(seed)
    pairs = [(rng.randrange(-1, owners), None) for _ in range(events)]
    pairs = [(owner, _event(owner, n, rng)) for n, (owner, _) in enumerate(pairs)]
    batches = [pairs[k:k + 97] for k in range(0, len(pairs), 97)]
    batches.append([(METADATA, META[0])])
    return pairs, batches


@pytest.mark.parametrize("compress", [True, False])
def test_pieces_hold_the_exact_event_bytes_in_input_order_after_the_metadata(tmp_path, compress):
    pairs, batches = _interleaved(owners=5, events=4000)
    out, files = _write(tmp_path, batches, compress=compress, max_open=2)
    for owner, name in files.items():
        data = (out / name).read_bytes()
        text = gzip.decompress(data) if compress else data
        expected = [event for o, event in pairs if o == owner]
        assert text.startswith(b'{\n  "schemaVersion": 1,\n  "distributedInfo": {"backend": '
                               b'"nccl", "rank": 3},\n  "traceEvents": [\n' + META[0] + b",\n")
        assert text.endswith(b'\n],\n  "traceName": "t.json",\n  "displayTimeUnit": "ms"\n}\n')
        assert b",\n".join(expected) in text
        trace = json.loads(text)
        assert len(trace["traceEvents"]) == 1 + len(expected)
        assert trace["traceEvents"][0]["ph"] == "M"


def test_pieces_decided_in_order_are_read_from_the_pack_in_place_whichever_are_written(
        tmp_path):
    # A loop on the CPU alone: each piece's events come in owner order, so the pack's parts
    # are in order in its file (no sort); pieces asked for out of order (the events outside
    # first, then some pieces skipped) are found from the offsets kept a block at a time.
    rng = random.Random(3)
    pairs = [(owner, _event(owner, n, rng)) for n, owner in
             enumerate(sorted(rng.randrange(0, 2500) for _ in range(4000)))]
    out = tmp_path / "in-order"
    out.mkdir()
    writer = PieceWriter(str(out))
    for k in range(0, len(pairs), 97):
        writer.add_many(pairs[k:k + 97])
    chosen = sorted({owner for owner, _ in pairs if owner < 1200 or owner % 7 == 0})
    records = [IterationRecord(index=owner, start_ts=0.0, end_ts=1.0) for owner in chosen]
    files = writer.finish(records, HEADER_BEFORE, HEADER_AFTER)
    assert sorted(files) == [OUTSIDE] + chosen
    for owner, name in files.items():
        trace = json.loads(gzip.decompress((out / name).read_bytes()))
        expected = [json.loads(event) for o, event in pairs if o == owner]
        assert trace["traceEvents"] == expected


@pytest.mark.parametrize("level", [1, 0, 6])  # ISA-L's level 1; zlib's others
def test_a_compressed_piece_is_one_gzip_member_that_gzip_zcat_and_zlib_read_whole(tmp_path,
                                                                                   level):
    # Enough bytes for several hand-overs to the spool thread, and max_open=2 over 5 pieces:
    # every piece is made of many deflate segments.
    pairs, batches = _interleaved(owners=5, events=30000)
    assert sum(len(e) for _, e in pairs) > 3 * SPOOL_TASK_BYTES
    plain, _ = _write(tmp_path, batches, compress=False, max_open=2)
    out, files = _write(tmp_path, batches, compress=True, max_open=2, level=level)
    for name in files.values():
        expected = (plain / name.removesuffix(".gz")).read_bytes()
        data = (out / name).read_bytes()
        member = zlib.decompressobj(wbits=31)  # gzip: header, checks the CRC32 and size
        assert member.decompress(data) == expected
        assert member.eof and member.unused_data == b""  # one member, nothing after it
        assert gzip.decompress(data) == expected
        zcat = subprocess.run(["zcat", str(out / name)], capture_output=True, check=True)
        assert zcat.stdout == expected
        subprocess.run(["gzip", "-t", str(out / name)], check=True)


@pytest.mark.parametrize("level", [1, 6])
def test_pieces_of_a_few_events_are_stored_and_read_whole_as_the_others(tmp_path, level):
    # pieces whose events are at most STORED_PACK_BYTES are a stored block between the
    # deflated head and tail; one byte more, deflated: both one member that readers take
    head = b'{"ph": "i", "name": "x", "pad": "'
    events = [b"{}"] + [head + b"a" * (size - len(head) - 2) + b'"}' for size in (
        STORED_PACK_BYTES, STORED_PACK_BYTES + 1, 3 * STORED_PACK_BYTES)]
    batches = [[(owner, event) for owner, event in enumerate(events)]]
    plain, _ = _write(tmp_path, batches, compress=False)
    out, files = _write(tmp_path, batches, compress=True, level=level)
    stored = []
    for owner, name in files.items():
        expected = (plain / name.removesuffix(".gz")).read_bytes()
        data = (out / name).read_bytes()
        member = zlib.decompressobj(wbits=31)
        assert member.decompress(data) == expected
        assert member.eof and member.unused_data == b""
        assert subprocess.run(["zcat", str(out / name)], capture_output=True,
                              check=True).stdout == expected
        stored.append(owner >= 0 and events[owner] in data)
    assert stored == [False, True, True, False, False]  # outside first: no events


def test_small_pieces_written_in_native_code_are_those_written_one_by_one(tmp_path,
                                                                         monkeypatch):
    # ``_native.small_pieces`` writes runs of tiny pieces (one stored part of the pack each);
    # among them pieces it leaves to ``_assemble``: deflated (over STORED_PACK_BYTES), of
    # two parts (events handed over in two tasks), with a spool file (over
    # PACK_PIECE_BYTES), skipped (not chosen), and more than STOP_CHECK_PIECES in all
    rng = random.Random(5)
    small = [(owner, b'{"ph": "X", "name": "step %d"}' % owner) for owner in range(300)]
    small[40] = (40, b'{"pad": "%s"}' % (b"x" * STORED_PACK_BYTES))
    small[200] = (200, b'{"pad": "%s"}' % (b"y" * PACK_PIECE_BYTES))
    batches = [small[:150], [(149, b'{"again": 1}')] + small[150:],
               [(300, b'{"ph": "M", "name": "%d"}' % rng.randrange(9)) for _ in range(3)]]
    chosen = [owner for owner in range(301) if owner % 97 != 5]
    native = decode_module._native
    if native is None:
        pytest.skip("stream_split._native is not built")
    runs = []  # how many pieces each call of the native pass wrote

    def small_pieces(*args):
        written = native.small_pieces(*args)
        runs.append(written[0])
        return written
    monkeypatch.setattr(decode_module, "_native", SimpleNamespace(**{
        **{name: getattr(native, name) for name in dir(native) if not name.startswith("_")},
        "small_pieces": small_pieces}))
    written = {}
    for passes in ("native", "numpy"):
        out = tmp_path / passes
        out.mkdir()
        writer = PieceWriter(str(out))
        for batch in batches:
            writer.add_many(batch)
        records = [IterationRecord(index=owner, start_ts=0.0, end_ts=1.0) for owner in chosen]
        with decoder_passes(passes):
            files = writer.finish(records, HEADER_BEFORE, HEADER_AFTER)
        written[passes] = {name: (out / name).read_bytes() for name in files.values()}
    assert written["native"] == written["numpy"]
    assert 0 < sum(runs) < len(chosen) - 3  # (not the deflated, the two-part, the spooled)
    assert len(written["native"]) == len(chosen) + 1  # and the events outside
    assert gzip.decompress(written["native"]["iteration_00149.json.gz"]).count(b"again") == 1


PAIR_BATCHES = st.lists(st.lists(st.tuples(
    st.sampled_from([METADATA, OUTSIDE, 0, 1, 2, 7, 300]),
    st.one_of(st.binary(min_size=1, max_size=9),
              st.integers(0, 99).map(lambda ts: {"ph": "i", "ts": ts}))), max_size=30),
    max_size=5)


@settings(max_examples=200, deadline=None)
@given(PAIR_BATCHES)
def test_batches_joined_in_native_code_are_handed_over_as_grouped_in_python(batches):
    # ``_native.joined_runs`` (runs of pairs in a row; None where a pair is metadata or an
    # event given as a dict, nothing changed) and ``_grouped_parts`` (the Python way): the
    # same tasks for the spool thread, the same separators, the same metadata
    native = decode_module._native
    if native is None:
        pytest.skip("stream_split._native is not built")
    handed = {}
    for passes in ("native", "numpy"):
        writer = PieceWriter.__new__(PieceWriter)  # no folder, no spool thread: the tasks
        writer._started, writer._select = bytearray(), None
        writer._pending_owners, writer._pending_parts, writer._pending_size = [], [], 0
        writer.metadata, writer._metadata_size, writer.metadata_apart = [], 0, False
        tasks = []
        writer._spool = SimpleNamespace(put=tasks.append)
        with decoder_passes(passes):
            for batch in batches:
                writer.add_many(list(batch))
                writer._hand_over()
        handed[passes] = (tasks, writer.metadata, writer._started.rstrip(b"\0"))
    assert handed["native"] == handed["numpy"]


def test_joined_runs_leaves_what_it_refuses_unchanged():
    native = decode_module._native
    if native is None:
        pytest.skip("stream_split._native is not built")
    started = bytearray(b"\0\0\1")
    for pairs in ([(0, b"a"), (METADATA, b"m")], [(0, b"a"), (1, {"ts": 1})], [(0, "a")],
                  [(0, b"a"), (2 ** 70, b"b")], [(0, b"a"), (True, b"b")]):
        assert native.joined_runs(pairs, started, METADATA) is None
    assert started == b"\0\0\1"
    assert native.joined_runs([(0, b"a"), (0, b"b"), (5, b"c"), (0, b"d")], started,
                              METADATA) == ([0, 5, 0], [b",\na,\nb", b"c", b",\nd"], 10)
    assert started == b"\0\0\1\0\0\0\0\1"


def test_the_trailer_checksum_is_checked_by_readers(tmp_path):
    # the combined CRC32 is what passes the readers' check: a changed one fails it
    _, batches = _interleaved(owners=1, events=200)
    out, files = _write(tmp_path, batches, compress=True)
    data = (out / files[0]).read_bytes()
    gzip.decompress(data)
    forged = data[:-8] + bytes([data[-8] ^ 1]) + data[-7:]
    with pytest.raises(gzip.BadGzipFile, match="CRC"):
        gzip.decompress(forged)


def test_an_event_larger_than_a_copy_chunk_and_a_spool_task_is_written_whole(tmp_path):
    head = b'{"ph": "i", "name": "big", "ts": 1, "pad": "'
    event = head + b"x" * (max(COPY_CHUNK, SPOOL_TASK_BYTES) + 1) + b'"}'
    for compress in (False, True):
        folder = tmp_path / str(compress)
        folder.mkdir()
        writer = PieceWriter(str(folder), compress=compress)
        writer.add_many([(0, event), (0, b'{"ph": "i", "name": "small", "ts": 2}')])
        files = writer.finish([IterationRecord(index=0, start_ts=0.0, end_ts=3.0)], {}, {})
        data = (folder / files[0]).read_bytes()
        trace = json.loads(gzip.decompress(data) if compress else data)
        assert [e["name"] for e in trace["traceEvents"]] == ["big", "small"]


def test_events_given_as_dicts_are_serialized_beside_original_bytes(tmp_path):
    writer = PieceWriter(str(tmp_path))
    writer.add_many([(METADATA, {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2}),
                     (0, b'{"ph": "i", "name": "raw", "ts": 1}'),
                     (0, {"ph": "i", "name": "dict", "ts": 2}), (OUTSIDE, {"ph": "i", "ts": 3})])
    files = writer.finish([IterationRecord(index=0, start_ts=0.0, end_ts=3.0)], {}, {})
    piece = json.loads(gzip.decompress((tmp_path / files[0]).read_bytes()))
    assert [e["name"] for e in piece["traceEvents"]] == ["thread_name", "raw", "dict"]
    outside = json.loads(gzip.decompress((tmp_path / files[OUTSIDE]).read_bytes()))
    assert [e["ts"] for e in outside["traceEvents"][1:]] == [3]


def test_a_failure_on_the_spool_thread_is_raised_by_finish(tmp_path):
    writer = PieceWriter(str(tmp_path))
    os.rmdir(tmp_path / ".spool")  # the spool thread cannot create its files
    writer.add_many([(0, b'{"ph": "i", "ts": 1, "pad": "' + b"x" * SPOOL_TASK_BYTES + b'"}')])
    with pytest.raises(FileNotFoundError):
        writer.finish([IterationRecord(index=0, start_ts=0.0, end_ts=1.0)], {}, {})


def test_the_names_of_pieces_named_by_index_take_about_a_byte_a_piece(tmp_path):
    """1 M one-op iterations are 1 M pieces: their names, which follow from the index and
    the kind, are not kept as strings (a dict of names and a set of them: over 100 bytes a
    piece)."""
    n = 50_000
    records = [IterationRecord(index=i, kind=KIND_IDLE if i % 7 == 3 else KIND_ITERATION)
               for i in range(n)]
    writer = PieceWriter(str(tmp_path))
    tracemalloc.start()
    files = writer.file_names(records)
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    writer.discard()
    assert size < 4 * n
    assert len(files) == n + 1 and list(files)[:3] == [OUTSIDE, 0, 1]
    assert files[3] == "idle_00003.json.gz" and files[n - 1] == f"iteration_{n - 1:05d}.json.gz"
    assert files.get(n) is None and n not in files and files[OUTSIDE] == "outside.json.gz"


@pytest.mark.parametrize("odd_kind", [None, "warmup"])
def test_pieces_named_by_their_kinds_at_once_are_those_named_one_by_one(tmp_path, odd_kind):
    """``file_names`` given every iteration's kind (``Splitter.kinds``) and no selection names
    them at once (``PieceFiles.add_all_by_index``): the same names, in the same order, as
    with a selection that takes every one (one by one), also where a kind is not named apart
    (``piece_name``'s: all named one by one then)."""
    kinds = [KIND_IDLE if i % 7 == 3 else KIND_ITERATION for i in range(300)]
    if odd_kind is not None:
        kinds[151] = odd_kind
    records = [IterationRecord(index=i, kind=kind) for i, kind in enumerate(kinds)]
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    at_once = PieceWriter(str(tmp_path / "a"))
    one_by_one = PieceWriter(str(tmp_path / "b"), select=lambda owner: True)
    made = [writer.file_names(records, kinds) for writer in (at_once, one_by_one)]
    for writer in (at_once, one_by_one):
        writer.discard()
    assert list(made[0].items()) == list(made[1].items()) and len(made[0]) == len(made[1])
    assert made[0][3] == "idle_00003.json.gz" and made[0].get(299) == "iteration_00299.json.gz"
    assert made[0][151] == "iteration_00151.json.gz"  # (a kind not named apart: as ``piece_name``)


def test_pieces_named_by_step_keep_a_repeated_step_apart_by_index(tmp_path):
    records = [IterationRecord(index=i, step=s) for i, s in enumerate([7, 8, 8, None])]
    writer = PieceWriter(str(tmp_path), name_by="step")
    files = writer.file_names(records)
    writer.discard()
    assert [files[i] for i in range(4)] == ["step_00007.json.gz", "step_00008.json.gz",
                                            "iteration_00002.json.gz", "iteration_00003.json.gz"]


@pytest.mark.parametrize("passes", ["native", "numpy"])
@pytest.mark.parametrize("odd_kind", [None, "warmup"])
def test_pieces_named_a_block_at_a_time_are_those_named_one_by_one(tmp_path, odd_kind,
                                                                   passes):
    """``PieceFiles.chunks`` (``finish``'s blocks) and ``names_of`` (a page of the manifest's
    entries) name the pieces as ``get`` does one by one: blocks of one kind, of two, with a
    kind named apart, with iterations left out (a selection), and owners not in a row;
    named in C (``_native.index_names``) or in Python. Indices past 99999 take more digits."""
    kinds = [KIND_IDLE if 130 <= i < 140 or i == 7 else KIND_ITERATION for i in range(300)]
    kinds += [KIND_ITERATION] * 99_800
    if odd_kind is not None:
        kinds[151] = odd_kind
    records = [IterationRecord(index=i, kind=kind) for i, kind in enumerate(kinds)]
    for at, select in enumerate((None, lambda owner: owner % 50 != 3)):
        (tmp_path / str(at)).mkdir()
        writer = PieceWriter(str(tmp_path / str(at)), select=select)
        files = writer.file_names(records, kinds)
        writer.discard()
        with decoder_passes(passes):
            chunks = list(files.chunks(64))
            assert all(0 < len(chunk) <= 64 for chunk in chunks)
            assert [pair for chunk in chunks for pair in chunk] == [
                (owner, files.get(owner)) for owner in files]
            for owners in ([], list(range(64)), list(range(120, 150)), list(range(140, 204)),
                           [1, 2, 5], [OUTSIDE, 0], list(range(280, 310)), [153],
                           list(range(99_990, 100_010))):
                assert files.names_of(owners) == [files.get(owner) for owner in owners]
        assert files.get(100_000) == "iteration_100000.json.gz"
