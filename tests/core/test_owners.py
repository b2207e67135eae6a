"""stream_split.core.owners: who owns an event. ``Windows``: a CPU op by the window its time
falls in; ``MonotonicOwnerMap``: GPU work by the correlation id of its launch, as a few id
ranges. Fed directly, no engine."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stream_split.core.owners import AnnotationOwners, MonotonicOwnerMap, Windows
from stream_split.core.records import OUTSIDE


def windows(*starts, last_end=None, closed=True) -> Windows:
    w = Windows()
    for start in starts:
        w.add(start)
    if closed:
        w.close(last_end)
    return w


# -- Windows ---------------------------------------------------------------------------------------

def test_an_op_belongs_to_the_window_holding_its_start():
    w = windows(10.0, 20.0, 30.0, last_end=40.0)
    assert [w.owner(s, s + 1) for s in (10.0, 15.0, 20.0, 29.0, 38.0)] == [0, 0, 1, 1, 2]


def test_before_the_first_boundary_and_after_the_last_end_is_outside():
    w = windows(10.0, 20.0, last_end=30.0)
    assert w.owner(0.0, 5.0) == OUTSIDE
    assert w.owner(30.0, 35.0) == OUTSIDE


def test_without_a_boundary_everything_is_outside():
    assert windows().owner(5.0, 6.0) == OUTSIDE


def test_the_last_window_is_open_ended_when_no_end_is_known():
    w = windows(10.0, 20.0)
    assert w.owner(1e9, 1e9 + 1) == 1


def test_an_op_crossing_one_edge_goes_to_the_side_holding_most_of_it():
    w = windows(10.0, 20.0, 30.0, last_end=40.0)
    assert w.owner(19.0, 25.0) == 1  # 1 µs before the edge, 5 after
    assert w.owner(15.0, 21.0) == 0
    assert w.owner(18.0, 22.0) == 0  # a tie stays with the window it starts in
    assert w.owner(8.0, 19.0) == 0  # opened just before the first boundary


def test_an_op_crossing_two_edges_spans_iterations_and_belongs_to_none():
    w = windows(10.0, 20.0, 30.0, last_end=40.0)
    assert w.owner(15.0, 31.0) == OUTSIDE
    assert w.owner(5.0, 45.0) == OUTSIDE


def test_an_op_crossing_into_outside_goes_there_when_most_of_it_is_there():
    w = windows(10.0, 20.0, last_end=30.0)
    assert w.owner(28.0, 38.0) == OUTSIDE
    assert w.owner(25.0, 31.0) == 1


def test_the_cached_window_gives_the_answer_a_fresh_lookup_gives():
    ops = [(21.0, 22.0), (25.0, 26.0), (12.0, 13.0), (29.0, 31.0), (31.0, 32.0), (36.0, 37.0),
           (45.0, 46.0), (22.0, 23.0)]
    w = windows(10.0, 20.0, 30.0, closed=False)
    seen = [w.owner(*op) for op in ops[:5]]
    w.add(40.0)  # new edges: what was cached must not answer for them
    seen += [w.owner(*op) for op in ops[5:]]
    w.close(50.0)
    fresh = windows(10.0, 20.0, 30.0, 40.0, last_end=50.0)
    assert seen[5:] == [2, 3, 1] == [fresh.owner(*op) for op in ops[5:]]
    assert seen[:5] == [1, 1, 0, 1, 2]


def test_only_events_ending_before_the_latest_boundary_are_decidable():
    w = windows(10.0, 20.0, closed=False)
    assert w.decidable(19.9)
    assert not w.decidable(20.0), "at the latest boundary: it may still be revised"
    assert not windows(closed=False).decidable(0.0)
    w.close(30.0)
    assert w.decidable(1e12)


@pytest.mark.parametrize("closed", [False, True])
def test_decidable_many_and_owners_agree_with_one_at_a_time(closed):
    w = windows(10.0, 20.0, 30.0, last_end=40.0, closed=closed)
    starts = np.array([0.0, 9.0, 10.0, 19.0, 15.0, 25.0, 28.0, 5.0, 18.0])
    ends = np.array([1.0, 12.0, 10.0, 25.0, 31.0, 26.0, 38.0, 45.0, 22.0])
    assert w.decidable_many(ends).tolist() == [w.decidable(e) for e in ends.tolist()]
    ok = w.decidable_many(ends)
    assert w.owners(starts[ok], ends[ok]).tolist() == [
        w.owner(s, e) for s, e in zip(starts[ok].tolist(), ends[ok].tolist())]


def test_owners_with_a_last_end_before_the_last_start_answers_as_owner_does():
    w = windows(10.0, 20.0, last_end=15.0)
    starts, ends = np.array([12.0, 17.0, 25.0]), np.array([13.0, 18.0, 26.0])
    assert w.owners(starts, ends).tolist() == [w.owner(s, e) for s, e in
                                               zip(starts.tolist(), ends.tolist())]


def test_owners_without_a_boundary_are_all_outside():
    assert windows().owners(np.array([1.0, 2.0]), np.array([3.0, 4.0])).tolist() == [OUTSIDE] * 2


# -- StepOpeners: Python frames owned by the step they open ----------------------------------------

LOOP, OTHER = (1, 1), (1, 2)


def stepped(*boundaries, closed=False, last_end=None) -> Windows:
    """Windows whose boundaries each have a gap: (start, where the gap before it begins)."""
    w = Windows()
    for start, opens_after in boundaries:
        w.add(start, opens_after, LOOP)
    if closed:
        w.close(last_end)
    return w


def test_a_frame_from_the_gap_that_holds_the_boundary_opens_the_step():
    # Step 1's first op at 100; step 0's last op ended at 90. ``training_step`` begins at 92
    # and ends before the next step: the step's, though most of the gap lies before it.
    w = stepped((10.0, -np.inf), (100.0, 90.0), (200.0, 190.0))
    assert w.frame_owner(LOOP, 92.0, 103.0, "training_step") == 1
    assert w.owner(92.0, 103.0) == 1, "once known, by its times alone (a held frame)"


def test_the_frames_nested_in_the_opener_before_the_first_op_are_the_steps():
    # An RNG call (93-94) inside ``training_step``, before the step's first op.
    w = stepped((10.0, -np.inf), (100.0, 90.0), (200.0, 190.0))
    assert w.frame_owner(LOOP, 93.0, 94.0, "random") is None, "no opener seen yet"
    w.frame_owner(LOOP, 92.0, 180.0, "training_step")
    assert w.frame_owner(LOOP, 93.0, 94.0, "random") == 1


def test_the_latest_boundary_owns_no_frame_while_it_may_be_revised():
    # A trigger not yet confirmed by its anchor may be retracted: the frames before it stay
    # with the step before (as they would once it is), the frame that holds it waits.
    w = stepped((10.0, -np.inf), (100.0, 90.0))
    assert w.frame_owner(LOOP, 92.0, 180.0, "validate", latest_revisable=True) is None
    assert w.frame_owner(LOOP, 93.0, 94.0, "random", latest_revisable=True) is None
    w.drop_last()
    assert w.owner(93.0, 94.0) == 0


def test_a_frame_in_the_gap_that_opens_nothing_stays_with_the_step_before():
    # ``prof.step()`` after step 0's last op, outside the frame that opens step 1; and
    # frames of another thread, or that began before the gap (they hold step 0's ops).
    w = stepped((10.0, -np.inf), (100.0, 90.0), (200.0, 190.0))
    w.frame_owner(LOOP, 95.0, 180.0, "training_step")
    assert w.frame_owner(LOOP, 91.0, 94.0, "step") is None
    assert w.frame_owner(OTHER, 96.0, 180.0, "worker") is None
    assert w.frame_owner(LOOP, 80.0, 150.0, "loop body") is None


def test_a_frame_that_holds_the_next_boundary_too_opens_no_step():
    # The program's own frame begins before the first op and holds every step.
    w = stepped((10.0, -np.inf), (100.0, 90.0), (200.0, 190.0))
    assert w.frame_owner(LOOP, 5.0, 500.0, "main") is None
    assert w.frame_owner(LOOP, 6.0, 7.0, "random") is None, "nested in no opener"
    assert w.frame_owner(LOOP, 6.0, 50.0, "training_step") == 0


def test_the_last_steps_opener_is_decided_at_close_and_ends_the_last_iteration():
    w = stepped((10.0, -np.inf), (100.0, 90.0))
    assert w.frame_owner(LOOP, 95.0, 260.0, "training_step") is None, "not decidable yet"
    assert w.frame_owner(LOOP, 96.0, 97.0, "random") == 1
    w.close(250.0)
    assert w.last_end == 260.0
    assert w.owner(95.0, 260.0) == 1
    assert w.opened_steps() == {1: (95.0, "training_step")}


def test_frames_are_owned_as_before_where_no_boundary_has_a_gap():
    w = windows(10.0, 100.0, 200.0, closed=False)
    assert w.frame_owner(LOOP, 92.0, 103.0, "training_step") is None
    assert w.in_gaps(np.array([92.0])).tolist() == [False]


def test_a_moved_or_withdrawn_boundary_forgets_the_frames_that_held_it():
    w = stepped((10.0, -np.inf), (100.0, 90.0), (200.0, 190.0))
    w.frame_owner(LOOP, 195.0, 260.0, "training_step")
    w.move_last(205.0, 203.0, LOOP)
    assert list(w.starts) == [10.0, 100.0, 205.0] and w.opened_steps() == {}
    w.drop_last()
    assert list(w.starts) == [10.0, 100.0]


def test_in_gaps_marks_the_frames_that_begin_in_a_gap():
    w = stepped((10.0, -np.inf), (100.0, 90.0), (200.0, 190.0))
    starts = np.array([5.0, 50.0, 92.0, 100.0, 150.0, 195.0, 250.0])
    assert w.in_gaps(starts).tolist() == [True, False, True, False, False, True, False]



def test_a_boundary_comes_after_the_gaps_were_read_in_bulk():
    """``in_gaps`` and ``owners`` read copies of the columns: a boundary added or withdrawn
    after them is not refused (a view of the growing column made its append fail with
    ``BufferError``), and the next reads see it."""
    w = stepped((10.0, 5.0), (100.0, 90.0))
    assert w.in_gaps(np.array([7.0, 95.0, 150.0])).tolist() == [True, True, False]
    assert w.owners(np.array([20.0]), np.array([30.0])).tolist() == [0]
    w.add(200.0, 190.0, LOOP)
    w.drop_last()
    w.add(300.0, 290.0, LOOP)
    assert w.in_gaps(np.array([150.0, 195.0, 295.0])).tolist() == [False, False, True]
    assert w.owners(np.array([150.0, 250.0]), np.array([160.0, 260.0])).tolist() == [1, 1]


_STEPS = st.lists(st.tuples(st.sampled_from(["add", "move", "drop", "read"]),
                            st.floats(0.0, 50.0), st.booleans()), max_size=40)


@settings(max_examples=200, deadline=None)
@given(steps=_STEPS, last_end=st.one_of(st.none(), st.floats(0.0, 2000.0)))
def test_bulk_reads_between_boundary_changes_answer_as_one_at_a_time(steps, last_end):
    """Boundaries added, moved and withdrawn, with bulk reads between (``owners``, ``in_gaps``,
    which keep copies brought up to date): each read answers what ``owner`` and the gaps'
    floors answer for the boundaries of that moment, and ``decidable`` (against the latest
    start kept as an attribute) what ``decidable_many`` does."""
    w = Windows()
    probes = np.arange(-5.0, 2100.0, 7.5)
    ts = 0.0

    def check():
        decided = w.decidable_many(probes + 3.0)
        assert w.latest_start == (w.starts[-1] if w.starts else float("-inf"))
        assert decided.tolist() == [w.decidable(end) for end in (probes + 3.0).tolist()]
        starts, ends = probes[decided], probes[decided] + 3.0
        assert w.owners(starts, ends).tolist() == [
            w.owner(s, e) for s, e in zip(starts.tolist(), ends.tolist())]
        k = np.searchsorted(np.array(w.starts), probes, "right")
        floors = [w.openers._floors[i] if w.openers.any and i < len(w.starts) else np.nan
                  for i in k.tolist()]
        assert w.in_gaps(probes).tolist() == [bool(p >= f) for p, f in zip(probes, floors)]

    for action, step, gap in steps:
        if action == "read":
            check()
        elif action == "drop" and w.starts:
            w.drop_last()
        elif action == "move" and w.starts:
            w.move_last(w.starts[-1] + step, w.starts[-1] if gap else None, LOOP)
        else:
            ts += step
            w.add(ts, ts - step / 2 if gap else None, LOOP)
    check()
    w.close(last_end)
    check()


# -- MonotonicOwnerMap: GPU work by correlation ----------------------------------------------------

def test_gpu_work_is_owned_by_its_launch_s_iteration():
    owners = MonotonicOwnerMap()
    for correlation, iteration in [(100, 0), (101, 0), (102, 1), (105, 1), (110, 2)]:
        owners.add(correlation, iteration)
    assert [owners.lookup(c) for c in (100, 101, 102, 105, 110)] == [0, 0, 1, 1, 2]


def test_the_range_found_last_grows_only_once_a_look_up_found_one():
    # Before any look-up the range found last is empty, its low end 1: the launches 1 and 2
    # of one iteration do not make it [1, 2] with no owner (a flow with id 2, tested against
    # it inline by the engine, read None as its owner: a TypeError).
    owners = MonotonicOwnerMap()
    owners.add(1, 0)
    owners.add(2, 0)
    assert not owners.hit_lo <= 2 <= owners.hit_hi
    assert owners.lookup(2) == 0 and (owners.hit_lo, owners.hit_hi, owners.hit_owner) == (1, 2, 0)
    owners.add(3, 0)  # the range found last is the last one: it grows with it
    assert owners.hit_hi == 3 and owners.lookup(3) == 0


def test_a_correlation_never_launched_has_no_owner_yet():
    owners = MonotonicOwnerMap()
    assert owners.lookup(7) is None
    owners.add(10, 0)
    owners.add(20, 1)
    assert owners.lookup(9) is None and owners.lookup(21) is None


def test_ids_between_launches_of_one_iteration_belong_to_it():
    # The range grows from the first to the last launch of a run; ids in between were
    # launched by the same iteration (or by no one).
    owners = MonotonicOwnerMap()
    owners.add(10, 0)
    owners.add(14, 0)
    owners.add(20, 1)
    assert owners.lookup(12) == 0 and owners.lookup(17) is None


def test_memory_is_one_range_per_run_of_launches_not_one_per_launch():
    owners = MonotonicOwnerMap()
    for iteration in range(50):
        for k in range(1000):
            owners.add(iteration * 1000 + k, iteration)
    assert len(owners) == 50 and owners.order_breaks == 0
    assert owners.lookup(49_999) == 49 and owners.lookup(1000) == 1


def test_an_id_out_of_order_splits_its_range_and_is_counted():
    owners = MonotonicOwnerMap()
    owners.add(10, 0)
    owners.add(20, 0)
    owners.add(30, 1)
    owners.add(15, 5)
    assert [owners.lookup(c) for c in (10, 14, 15, 16, 20, 30)] == [0, 0, 5, 0, 0, 1]
    assert owners.order_breaks == 1 and len(owners) == 4


def test_an_id_out_of_order_with_the_same_owner_changes_nothing():
    owners = MonotonicOwnerMap()
    owners.add(10, 0)
    owners.add(20, 0)
    owners.add(15, 0)
    assert owners.order_breaks == 0 and len(owners) == 1


def test_an_id_out_of_order_in_a_gap_grows_a_neighbour_or_makes_a_range():
    owners = MonotonicOwnerMap()
    owners.add(10, 0)
    owners.add(30, 1)
    owners.add(12, 0)  # grows [10, 10] to [10, 12]
    owners.add(28, 1)  # grows [30, 30] down to [28, 30]
    owners.add(20, 7)  # a range of its own
    owners.add(5, 3)  # before the first
    assert owners.order_breaks == 4 and len(owners) == 4
    assert [owners.lookup(c) for c in (5, 10, 12, 20, 28, 30, 25)] == [3, 0, 0, 7, 1, 1, None]


def test_the_range_found_last_grows_with_the_launches_that_extend_it():
    # ``hit_lo``..``hit_hi`` (``Splitter._route`` tests it before ``lookup``): the last range
    # as ``lookup`` found it, grown by each launch of its owner after it, and never holding
    # an id of another owner.
    owners = MonotonicOwnerMap()
    owners.add(10, 0)
    assert owners.lookup(10) == 0 and (owners.hit_lo, owners.hit_hi) == (10, 10)
    owners.add(12, 0)
    assert (owners.hit_lo, owners.hit_hi, owners.hit_owner) == (10, 12, 0)
    owners.add(20, 1)  # another owner's range: the one found last stays as it is
    owners.add(21, 1)
    assert (owners.hit_lo, owners.hit_hi, owners.hit_owner) == (10, 12, 0)
    assert owners.lookup(20) == 1
    owners.add(25, 1)
    assert (owners.hit_lo, owners.hit_hi, owners.hit_owner) == (20, 25, 1)
    owners.add(22, 2)  # out of order: the range is split, none is kept at hand
    assert owners.hit_lo > owners.hit_hi
    for key in range(10, 27):
        assert owners.lookup(key) == {10: 0, 11: 0, 12: 0, 22: 2}.get(
            key, 1 if 20 <= key <= 25 else None)


def test_an_annotation_held_undecided_has_no_owner_until_it_is_decided():
    # Step 1 owns ids 11 and 50 (a communication thread's); id 30, the next step's, is held.
    owners = AnnotationOwners()
    owners.hold(30)
    owners.add(11, 1)
    owners.add(50, 1)
    assert owners.lookup(30) is None and owners.lookup(20) == 1
    owners.add(30, 2)
    assert owners.lookup(30) == 2


@settings(max_examples=200, deadline=None)
@given(launches=st.lists(st.tuples(st.integers(-50, 200), st.integers(-1, 4)), max_size=30),
       keys=st.lists(st.one_of(st.none(), st.integers(-60, 210), st.just(2 ** 70)),
                     max_size=40))
def test_owners_looked_up_at_once_are_those_looked_up_one_by_one(launches, keys):
    # Held GPU work is looked up a batch at a time (``lookup_many``, in bulk where it can):
    # the same answers as ``lookup``, for ids in ranges, in gaps, out of order, None, or
    # beyond int64 (looked up one by one).
    owners = MonotonicOwnerMap()
    for key, owner in launches:
        owners.add(key, owner)
    expected = [None if key is None else owners.lookup(key) for key in keys]
    assert owners.lookup_many(keys) == expected
    assert owners.lookup_many([key for key in keys if key is not None] * 8) == \
        [owner for key, owner in zip(keys, expected) if key is not None] * 8


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.tuples(st.booleans(), st.integers(-50, 200), st.integers(-1, 4)),
                      max_size=60))
def test_the_range_found_last_answers_as_a_fresh_lookup(steps):
    # ``feed`` tests the range ``lookup`` found last (``hit_lo`` to ``hit_hi``) before it
    # looks up: every id in it must have that owner still, whatever was added since (grown
    # ranges, new ones, an id out of order that splits a range).
    owners = MonotonicOwnerMap()
    for is_lookup, key, owner in steps:
        if is_lookup:
            owners.lookup(key)
        else:
            owners.add(key, owner)
        for k in range(max(owners.hit_lo, -60), min(owners.hit_hi, 210) + 1):
            assert owners.lookup(k) == owners.hit_owner
