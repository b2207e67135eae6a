"""stream_split.spill: the store of undecided events. Batches come back as they went in,
only those a boundary may decide, oldest first; the file-backed store makes its file at the
first batch and gives it back when the last one is taken."""
import os

import pytest

from stream_split.spill import MemorySpill, TempFileSpill, batch_key

STORES = [MemorySpill, TempFileSpill]

# A held event as the engine keeps it: (end, ...what deciding it reads).
EARLY = [(10.0, "a", b'{"ph":"X"}'), (12.0, "b", None)]
LATE = [(50.0, "c", b"\xff raw bytes"), (40.0, "d", {"args": [1, 2]})]
WAITING = [(5.0, "e", None), (None, "kernel waiting for its launch", None)]


def files_in(folder) -> int:
    """How many open descriptors of this process point into ``folder`` (the spill's file has
    no name there, but its descriptor's link still says where it lies)."""
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            found += os.readlink(f"/proc/self/fd/{fd}").startswith(f"{folder}/")
        except OSError:  # the listing's own descriptor, closed already
            pass
    return found


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="no /proc/self/fd")


def test_the_key_of_a_batch_is_its_earliest_end():
    assert batch_key(EARLY) == 10.0 and batch_key(LATE) == 40.0


def test_a_batch_holding_an_event_without_an_end_is_due_only_at_the_end():
    assert batch_key(WAITING) == float("inf")


@pytest.mark.parametrize("store", STORES)
def test_batches_come_back_as_they_went_in(store, tmp_path):
    with store(*([str(tmp_path)] if store is TempFileSpill else [])) as spill:
        spill.put(iter(EARLY))
        spill.put(LATE)
        handles = spill.due(float("inf"))
        assert [spill.take(h) for h in handles] == [EARLY, LATE]


@pytest.mark.parametrize("store", STORES)
def test_due_names_only_batches_a_boundary_may_decide_oldest_first(store):
    with store() as spill:
        spill.put(LATE)
        spill.put(WAITING)
        spill.put(EARLY)
        assert spill.due(9.9) == []
        assert len(spill.due(10.0)) == 1  # an end at the boundary itself is due
        early, = spill.due(39.0)
        assert spill.take(early) == EARLY
        late, = spill.due(1e12)
        assert spill.take(late) == LATE
        last, = spill.due(float("inf"))
        assert spill.take(last) == WAITING


@pytest.mark.parametrize("store", STORES)
def test_the_length_counts_held_events_not_batches(store):
    with store() as spill:
        assert len(spill) == 0
        spill.put(EARLY)
        spill.put(LATE + WAITING)
        assert len(spill) == 6
        spill.take(spill.due(20.0)[0])
        assert len(spill) == 4


@pytest.mark.parametrize("store", STORES)
def test_close_drops_what_is_held_and_can_be_called_twice(store):
    spill = store()
    spill.put(EARLY)
    spill.close()
    assert len(spill) == 0 and spill.due(float("inf")) == []
    spill.close()


@pytest.mark.parametrize("store", STORES)
def test_leaving_the_with_block_closes_the_store(store):
    with store() as spill:
        spill.put(EARLY)
    assert len(spill) == 0


def test_the_file_store_counts_every_event_it_ever_spilled():
    with TempFileSpill() as spill:
        spill.put(EARLY)
        spill.take(spill.due(20.0)[0])
        spill.put(LATE)
        assert spill.spilled_total == 4 and len(spill) == 2


@needs_proc
def test_the_file_is_made_at_the_first_batch_in_the_folder_given(tmp_path):
    spill = TempFileSpill(str(tmp_path))
    assert files_in(tmp_path) == 0, "no file while nothing is spilled"
    spill.put(EARLY)
    spill.put(LATE)
    assert files_in(tmp_path) == 1, "one file for every batch"
    assert os.listdir(tmp_path) == [], "the file has no name: nothing to clean up after a crash"
    spill.close()


@needs_proc
def test_the_file_is_given_back_when_the_last_batch_is_taken(tmp_path):
    spill = TempFileSpill(str(tmp_path))
    spill.put(EARLY)
    spill.put(LATE)
    first, second = spill.due(float("inf"))
    spill.take(first)
    assert files_in(tmp_path) == 1, "still holding a batch: the file stays"
    spill.take(second)
    assert files_in(tmp_path) == 0
    spill.put(WAITING)  # a later batch makes a new file
    assert files_in(tmp_path) == 1
    assert spill.take(spill.due(float("inf"))[0]) == WAITING
    assert files_in(tmp_path) == 0


@needs_proc
def test_closing_with_batches_held_gives_the_file_back(tmp_path):
    spill = TempFileSpill(str(tmp_path))
    spill.put(EARLY)
    spill.close()
    assert files_in(tmp_path) == 0 and len(spill) == 0


def test_held_columns_taken_and_joined_in_numpy_give_the_events_one_by_one_would(tmp_path):
    # ``HeldColumns`` keeps what the engine holds of each event (an op's thread as a tuple,
    # a view as a dict, None: counted as a frame) and its bytes in object arrays; taking,
    # joining and spilling them must give the very items the lists would, a thread tuple
    # still one item (not a row of its own).
    import numpy as np

    from stream_split.spill import HeldColumns
    frame = {"ph": "X", "cat": "python_function"}
    ends, starts = [5.0, 3.0, 9.0, 7.0], [1.0, 2.0, 4.0, 6.0]
    events = [(1, 2), None, {"cat": "cpu_op", "name": "a"}, (1, 3)]
    raws = [b"a", None, b"c", b"d"]

    def items(k):
        return [(ends[i], i, starts[i], frame if events[i] is None else events[i], None,
                 raws[i]) for i in k]

    held = HeldColumns(np.array(ends), np.arange(4), np.array(starts), raws, events)
    assert held.items(frame) == items(range(4)) and held.earliest == 3.0
    assert held.take(np.array([3, 0])).items(frame) == items([3, 0])
    assert held.take(slice(1, 3)).items(frame) == items([1, 2])
    plain = HeldColumns(np.array([1.0]), np.array([9]), np.array([0.5]), [None])
    joined = HeldColumns.joined([held.take(slice(2, 4)), plain])
    assert joined.items(frame) == items([2, 3]) + [(1.0, 9, 0.5, frame, None, None)]
    with TempFileSpill(str(tmp_path)) as spill:
        spill.put(held)
        assert spill.take(spill.due(3.0)[0]).items(frame) == items(range(4))


@pytest.mark.parametrize("ends", [[1.0, 2.0, 2.0, 5.0, 7.0], [5.0, 1.0, 7.0, 2.0, 2.0],
                                  [3.0], [4.0, 4.0, 4.0]])
@pytest.mark.parametrize("until", [0.5, 2.0, 2.5, 7.0, 8.0])
def test_held_columns_split_before_a_time_as_their_ends_say(ends, until):
    # ``split_before``: those that end before ``until`` and the others, each in their order,
    # by a binary search where the ends never fall (and in their slices after), as a mask
    # of the ends would take them; a part that ends wholly before is None.
    import numpy as np

    from stream_split.spill import HeldColumns
    frame = {"ph": "X", "cat": "python_function"}
    n = len(ends)
    held = HeldColumns(np.array(ends), np.arange(n), np.array(ends) - 0.5,
                       [bytes([k]) for k in range(n)], [(1, k) for k in range(n)],
                       np.ones(n, np.int8))
    items = held.items(frame)
    for rising in (False, None, None):  # (not asked; asked; known after the first split)
        held.rising = rising
        taken, kept = held.split_before(until)
        assert taken.items(frame) == [i for i in items if i[0] < until]
        rest = [i for i in items if not i[0] < until]
        assert (kept is None) == (not rest) and (kept is None or kept.items(frame) == rest)
        assert kept is None or kept.earliest == min(i[0] for i in rest)
    assert held.rising == (ends == sorted(ends))


def test_held_columns_give_integer_times_back_as_integers_through_take_join_and_spill(tmp_path):
    # A time given as an integer is held in the float columns (exactly: the engine holds no
    # larger one there) with a bit of ``exact`` saying so, and given back as the integer
    # (``times``), after ``take``, ``joined`` (with a part all floats) and the spill alike;
    # an end or a start alone may be one.
    import numpy as np

    from stream_split.spill import HeldColumns, HeldRows
    given = [(5, 1), (3.5, 2), (9.0, 4.0), (7, 6.25), (2 ** 53, -2 ** 53)]
    rows = HeldRows()  # (held as ``Splitter._hold_cpu`` holds them)
    for seq, (end, start) in enumerate(given):
        rows.items.append((end, seq, start, None, None, None))
    rows.exact = True
    held = rows.columns()

    def as_given(columns):
        ends, starts = columns.times()
        return [(repr(end), repr(start)) for end, start in zip(ends, starts)]
    expected = [(repr(end), repr(start)) for end, start in given]
    assert as_given(held) == expected
    assert as_given(held.take(np.array([3, 0]))) == [expected[3], expected[0]]
    assert as_given(held.take(slice(1, 3))) == expected[1:3]
    floats = HeldColumns(np.array([1.5]), np.array([9]), np.array([0.5]), [None])
    assert floats.exact is None
    assert as_given(HeldColumns.joined([floats, held.take(slice(3, 5))])) == \
        [("1.5", "0.5")] + expected[3:5]
    with TempFileSpill(str(tmp_path)) as spill:
        spill.put(held)
        assert as_given(spill.take(spill.due(10.0)[0])) == expected
