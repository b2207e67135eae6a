"""stream_split.core.stack: per-thread stacks of open CPU ops, the call structure the detector
reads. Fed (thread, name, start, end) directly."""
import random

from stream_split.core.stack import ThreadStacks


def names(stack) -> list:
    return list(stack)


def test_an_op_inside_the_open_one_is_its_child():
    stacks = ThreadStacks()
    stacks.push(1, "step", 0.0, 100.0)
    stacks.push(1, "forward", 10.0, 50.0)
    assert names(stacks.push(1, "linear", 12.0, 20.0)) == ["step", "forward", "linear"]


def test_push_returns_the_open_ops_names_with_the_new_op_on_top():
    stacks = ThreadStacks()
    stacks.push(1, "step", 0.0, 100.0)
    assert stacks.push(1, "forward", 10.0, 50.0) == ["step", "forward"]


def test_an_op_starting_at_or_after_the_top_s_end_pops_it():
    stacks = ThreadStacks()
    stacks.push(1, "step", 0.0, 100.0)
    stacks.push(1, "forward", 10.0, 50.0)
    stacks.push(1, "linear", 12.0, 20.0)
    # Starts exactly where "linear" ends: a sibling of it, under "forward".
    assert names(stacks.push(1, "relu", 20.0, 30.0)) == ["step", "forward", "relu"]
    # After "forward" ended: both closed ops go, in one push.
    assert names(stacks.push(1, "backward", 60.0, 90.0)) == ["step", "backward"]
    # After everything ended: the stack holds only the new op.
    assert names(stacks.push(1, "step", 200.0, 300.0)) == ["step"]


def test_an_op_outliving_the_top_beyond_the_tolerance_is_its_sibling():
    stacks = ThreadStacks(tolerance_us=1.0)
    stacks.push(1, "annotation", 0.0, 50.0)
    # Ends 5 µs after the annotation: the two cross each other, so not nested.
    assert names(stacks.push(1, "op", 40.0, 55.0)) == ["op"]


def test_a_child_ending_just_after_its_parent_within_the_tolerance_stays_nested():
    stacks = ThreadStacks(tolerance_us=1.0)
    stacks.push(1, "parent", 0.0, 50.0)
    assert names(stacks.push(1, "child", 40.0, 50.8)) == ["parent", "child"]
    stacks = ThreadStacks(tolerance_us=0.5)
    stacks.push(1, "parent", 0.0, 50.0)
    assert names(stacks.push(1, "child", 40.0, 50.8)) == ["child"]


def test_threads_have_stacks_of_their_own():
    stacks = ThreadStacks()
    stacks.push(1, "step", 0.0, 100.0)
    assert names(stacks.push(2, "worker", 10.0, 20.0)) == ["worker"]
    assert names(stacks.push(1, "forward", 10.0, 20.0)) == ["step", "forward"]


def test_an_op_going_back_in_time_begins_a_new_section_and_clears_the_stack():
    stacks = ThreadStacks()
    stacks.push(1, "ProfilerStep#1", 0.0, 100.0)
    stacks.push(1, "ProfilerStep#2", 100.0, 200.0)
    assert stacks.section(1) == 0 and stacks.sections_started == 0
    # Kineto wrote the thread's annotations first; its cpu_ops start again from the beginning.
    assert names(stacks.push(1, "aten::mm", 10.0, 20.0)) == ["aten::mm"]
    assert stacks.section(1) == 1 and stacks.sections_started == 1
    assert names(stacks.push(1, "aten::add", 15.0, 18.0)) == ["aten::mm", "aten::add"]


def test_sections_are_counted_per_thread_and_in_total():
    stacks = ThreadStacks()
    for thread in (1, 2):
        stacks.push(thread, "a", 50.0, 60.0)
        stacks.push(thread, "b", 10.0, 20.0)
    stacks.push(2, "c", 5.0, 6.0)
    assert (stacks.section(1), stacks.section(2), stacks.sections_started) == (1, 2, 3)


def test_a_thread_s_first_op_reads_as_in_a_stack_made_at_once():
    """A thread's first op is kept as it came, its stack made at its second op (a trace of
    a million one-op threads makes none): its second op nests in it, follows it, outlives
    it or goes back in time as in any stack, and the ops after it stack on it."""
    cases = [((12.0, 15.0), ["first", "second", "third"], 0),  # inside it
             ((20.0, 30.0), ["second", "third"], 0),  # after it ended
             ((12.0, 25.0), ["second", "third"], 0),  # outliving it: a sibling
             ((5.0, 14.0), ["second", "third"], 1)]  # back in time: a new section
    for (start, end), stack, section in cases:
        stacks = ThreadStacks(tolerance_us=1.0)
        assert names(stacks.push(1, "first", 10.0, 20.0)) == ["first"]
        assert stacks.section(1) == stacks.last_section == 0
        assert list(stacks.least_recent()) == [1] and len(stacks) == stacks.known == 1
        stacks.push(1, "second", start, end)
        assert names(stacks.push(1, "third", start + 1.0, start + 2.0)) == stack
        assert stacks.section(1) == stacks.last_section == section


def test_equal_starts_are_not_a_new_section():
    stacks = ThreadStacks()
    stacks.push(1, "outer", 10.0, 20.0)
    assert names(stacks.push(1, "inner", 10.0, 15.0)) == ["outer", "inner"]
    assert stacks.section(1) == 0


def test_note_start_counts_sections_without_keeping_a_stack():
    stacks = ThreadStacks()
    assert stacks.note_start(1, 50.0) == []
    assert stacks.note_start(1, 10.0) == []
    assert stacks.section(1) == 1 and stacks.sections_started == 1
    # The stack of that thread was never built.
    assert names(stacks.push(1, "op", 11.0, 12.0)) == ["op"]


def test_a_thread_never_seen_is_in_section_zero():
    assert ThreadStacks().section("unknown") == 0


def test_memory_is_the_deepest_nesting_not_the_length_of_the_trace():
    stacks = ThreadStacks()
    deepest = 0
    for step in range(1000):
        base = step * 100.0
        stacks.push(1, "step", base, base + 90.0)
        stacks.push(1, "forward", base + 1, base + 50.0)
        deepest = max(deepest, len(stacks.push(1, "linear", base + 2, base + 10.0)))
    assert deepest == 3
    assert len(stacks.push(1, "last", 1e9, 1e9 + 1)) == 1


def test_the_thread_read_last_reads_as_through_the_dict():
    """``push`` reads the next op of the thread read last without its dict (``_read``'s
    common case): the same stacks, sections and order of recency as through the dict
    (``forget([])`` before a push sends its op through it), in runs of one thread, with
    jumps back in time, and the thread read last forgotten and read again (anew)."""
    rng = random.Random(7)
    ops, clock = [], {1: 0.0, 2: 0.0, 3: 0.0}
    for k in range(400):
        thread = ops[-1][0] if k % 50 == 49 else rng.choice((1, 1, 1, 2, 3))
        clock[thread] = clock[thread] - 50.0 if rng.random() < 0.05 else \
            clock[thread] + rng.choice((0.0, 0.5, 2.0))
        ops.append((thread, f"op{k}", clock[thread], clock[thread] + rng.uniform(0, 6)))
    shortcut, through_dict = ThreadStacks(), ThreadStacks()
    for k, (thread, name, start, end) in enumerate(ops):
        if k % 50 == 49:  # the thread read last forgotten: its op begins it anew
            shortcut.forget([thread])
            through_dict.forget([thread])
        through_dict.forget([])
        assert names(shortcut.push(thread, name, start, end)) == \
            names(through_dict.push(thread, name, start, end))
        assert shortcut.last_section == through_dict.last_section
    assert list(shortcut.least_recent()) == list(through_dict.least_recent())
    assert [shortcut.section(t) for t in (1, 2, 3)] == [through_dict.section(t) for t in (1, 2, 3)]
    assert shortcut.sections_started == through_dict.sections_started > 0


def test_the_thread_read_last_forgotten_begins_anew():
    stacks = ThreadStacks()
    stacks.push(1, "outer", 0.0, 10.0)
    stacks.push(1, "late", 5.0, 6.0)
    stacks.push(1, "early", 1.0, 2.0)  # back in time: its second section
    stacks.forget([1])
    assert names(stacks.push(1, "inner", 3.0, 4.0)) == ["inner"]
    assert list(stacks.least_recent()) == [1] and stacks.section(1) == stacks.last_section == 0
