"""Memory that does not grow with the input (issue 22, item 3), checked small: the state of
idle threads is forgotten beyond ``stack.LIVE_THREADS`` threads, and what it decides stays
what it would have been (``benchmarks/adversarial.py`` measures the big cases' peak RSS)."""
from __future__ import annotations

import tracemalloc

import pytest

import stream_split.core.engine as engine
from stream_split.core import Splitter, SplitOptions
from stream_split.core.detect.close import leading_threads, loop_thread
from stream_split.core.detect.rules import RULES
from stream_split.core.detect.skeleton import Skeletons, ThreadSkeleton
from stream_split.core.owners import Windows
from stream_split.core.records import OUTSIDE
from stream_split.core.stack import ThreadStacks
from stream_split.pages import PagedList
from stream_split.testing.generate import generate
from stream_split.testing.replay import SCENARIOS


def _one_op_threads(n: int, t0: float = 0.0, pid=None) -> list:
    """One op on each of ``n`` threads (of one process, or each its own main thread)."""
    return [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": t0 + i, "dur": 1,
             "pid": 100 + i if pid is None else pid, "tid": 100 + i} for i in range(n)]


def _split(events: list, detector: str = "structure") -> Splitter:
    splitter = Splitter(SplitOptions(keep_events=False, detector=detector))
    for event in events:
        splitter.feed(event)
    splitter.close()
    return splitter


def _decided(splitter: Splitter) -> tuple:
    evidence = dict(splitter.evidence)
    evidence.pop("forgotten_threads", None)
    return ([(r.start_ts, r.end_ts, r.events, r.cpu_ops) for r in splitter.iterations],
            splitter.outside_events, evidence)


@pytest.mark.parametrize("detector, scenario", [("structure", "training"),
                                                ("structure", "training_steps"),
                                                ("steps", "training_steps")])
@pytest.mark.parametrize("layout", ["kineto", "time"])
def test_forgetting_idle_threads_keeps_the_loop_and_every_decision(detector, scenario, layout,
                                                                   monkeypatch):
    events = generate(SCENARIOS[scenario][0], seed=1, layout=layout,
                      **SCENARIOS[scenario][1]).events
    t0 = min(e["ts"] for e in events if "ts" in e)
    crowd = _one_op_threads(600, t0, pid=9805)  # side threads, before the loop's ops
    whole = _split(crowd + events, detector)
    monkeypatch.setattr(engine, "LIVE_THREADS", 64)
    bounded = _split(crowd + events, detector)
    assert bounded.evidence["forgotten_threads"] > 500
    assert len(whole.iterations) >= 4
    assert _decided(bounded) == _decided(whole)


#: Where each thread's state is allocated: the stacks, the order, the detector's skeletons.
_THREAD_STATE = [tracemalloc.Filter(True, f"*stream_split/core/{name}")
                 for name in ("stack.py", "order.py", "detect/*")]


def _thread_state_after_feeding(events: list) -> int:
    """Bytes the thread state holds after ``events`` (the events themselves wait for a
    window in the engine, spilled between batches: not counted)."""
    splitter = Splitter(SplitOptions(keep_events=False))
    tracemalloc.start()
    for event in events:
        splitter.feed(event)
    snapshot = tracemalloc.take_snapshot().filter_traces(_THREAD_STATE)
    tracemalloc.stop()
    splitter.close()
    return sum(stat.size for stat in snapshot.statistics("filename"))


def test_the_threads_kept_lead_as_the_loop_thread_is_chosen():
    """``leading_threads`` (what forgetting keeps): a main thread first, then the busiest,
    then the one that holds more ops, then the first read; ``loop_thread`` is among them."""
    skeletons = Skeletons(RULES.memory.max_nodes, RULES.memory.max_depth)
    # (thread, [(start, end) of its top-level ops]): ties at every rank
    for thread, ops in [((1, 10), [(0, 5)]), ((1, 11), [(0, 5)]), ((1, 12), [(0, 2), (3, 6)]),
                        ((2, 2), [(0, 1)]), ((3, 3), [(0, 1)]), ((1, 13), [(0, 9)]),
                        ((1, 14), [(0, 2), (2, 5)])]:
        state = skeletons.of(thread, 0)
        for start, end in ops:
            skeletons.add(state, state.parent_at(0), float(start), float(end), "aten::mm")
    chosen = lambda count: leading_threads(skeletons.threads, True, count)  # noqa: E731
    assert chosen(2) == [(2, 2), (3, 3)]
    assert chosen(3) == [(2, 2), (3, 3), (1, 13)]
    assert chosen(5) == [(2, 2), (3, 3), (1, 13), (1, 12), (1, 14)]  # busy 5 each: 2 ops held
    assert chosen(6) == [(2, 2), (3, 3), (1, 13), (1, 12), (1, 14), (1, 10)]
    assert loop_thread(skeletons.threads.values(), True).key == (2, 2)


def _read_as(skeleton) -> tuple:
    """What a skeleton holds of its top level, and how it ranks."""
    seen = skeleton.seen
    return (skeleton.key, skeleton.section, skeleton.read, skeleton.main, skeleton.busy,
            [(n.sym, n.start, n.end, n.gpu) for n in skeleton.roots],
            [n.sym for n in skeleton.stack],
            (seen.last_count, seen.singles) if skeleton.main else sorted(seen))


def test_an_op_kept_alone_reads_as_the_skeleton_made_of_it():
    """``Skeletons.lone``: a thread's first top-level op makes no skeleton until its next op,
    or until the skeleton is asked for (a launch credited, ``whole``); it ranks as it would
    (``leading_threads``), and the skeleton made then is the one ``of`` and ``add`` make."""
    ops = [((1, 10), 0, 5), ((2, 2), 0, 1), ((1, 11), 1, 9), ((3, 3), 0, 1), ((2, 2), 2, 3),
           ((1, 12), 2, 4)]
    eager, lazy = (Skeletons(RULES.memory.max_nodes, RULES.memory.max_depth) for _ in "ab")
    for thread, start, end in ops:
        state = eager.of(thread, 0)
        eager.add(state, state.parent_at(0), float(start), float(end), "aten::mm")
        if lazy.known(thread, 0) is None and \
                lazy.lone(thread, 0, float(start), float(end), "aten::mm", thread[0] == thread[1]):
            continue
        state = lazy.of(thread, 0)
        lazy.add(state, state.parent_at(0), float(start), float(end), "aten::mm")
    assert [type(t) for t in lazy.threads.values()] == \
        [tuple, ThreadSkeleton, tuple, tuple, tuple]
    for count in range(1, 6):
        assert leading_threads(lazy.threads, True, count) == \
            leading_threads(eager.threads, True, count)
    for skeletons in (eager, lazy):
        skeletons.credit_launch((1, 11), 5.0, 1, False, False)
    assert type(lazy.threads[((1, 11), 0)]) is ThreadSkeleton
    assert lazy.threads[((1, 11), 0)].roots[0].gpu == 1
    assert [_read_as(t) for t in lazy.whole()] == [_read_as(t) for t in eager.whole()]
    assert loop_thread(lazy.whole(), True) is lazy.threads[((2, 2), 0)]


def test_the_skeleton_given_last_goes_with_its_thread():
    """``Skeletons.latest`` (the skeleton ``of`` gave last, which the detector tests before
    asking ``of``): forgotten with its thread (its next op begins a new skeleton), kept when
    another is, the row's once matching (``keep_only``), none once dropped."""
    skeletons = Skeletons(RULES.memory.max_nodes, RULES.memory.max_depth)
    first = skeletons.of((1, 1), 0)
    assert skeletons.latest is first and skeletons.of((1, 1), 0) is first
    skeletons.forget([(1, 1)])
    assert skeletons.latest is None
    anew = skeletons.of((1, 1), 0)
    assert anew is not first and skeletons.latest is anew
    other = skeletons.of((1, 2), 0)
    skeletons.forget([(1, 1)])
    assert skeletons.latest is other
    row = skeletons.of((1, 3), 1)
    skeletons.of((1, 2), 0)
    skeletons.keep_only(row)
    assert skeletons.latest is row and list(skeletons.threads) == [((1, 3), 1)]
    skeletons.drop()
    assert skeletons.latest is None


@pytest.mark.parametrize("pid", [1, None], ids=["threads", "processes"])
def test_more_threads_of_one_op_each_take_no_more_memory(pid, monkeypatch):
    monkeypatch.setattr(engine, "LIVE_THREADS", 256)
    small = _thread_state_after_feeding(_one_op_threads(2_000, pid=pid))
    big = _thread_state_after_feeding(_one_op_threads(6_000, pid=pid))
    # at most 256 threads' state (about 1.5 KB each), whatever the threads read; without
    # forgetting 6 MB more
    assert small < 1_000_000 and big < 1_000_000


def test_an_open_nesting_takes_under_64_bytes_a_level():
    stacks = ThreadStacks()
    depth = 100_000
    ops = [(float(i), float(2 * depth - i)) for i in range(depth)]
    tracemalloc.start()
    for start, end in ops:
        stacks.push(1, "op", start, end)
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(stacks.push(1, "op", depth + 0.25, depth + 0.5)) == depth + 1
    assert size < 64 * depth  # with a tuple (end, name, start) a level: 72


def test_window_edges_take_8_bytes_an_iteration():
    windows = Windows()
    n = 100_000
    tracemalloc.start()
    for i in range(n):
        windows.add(1000.5 + 10 * i)  # a float made for it, as the detector's boundaries are
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert size < 10 * n  # a list of floats: 8 bytes a slot and the float's 24
    windows.close(None)
    assert windows.owner(1005.0, 1006.0) == 0 and windows.owner(500.0, 501.0) == OUTSIDE


def test_window_edges_beyond_2_53_stay_exact():
    windows = Windows()
    windows.add(2 ** 53 + 1)  # 2**53 in float64
    windows.close(None)
    assert windows.owner(2 ** 53, 2 ** 53) == OUTSIDE  # before the first start
    assert windows.owner(2 ** 53 + 1, 2 ** 53 + 1) == 0


def test_iterations_found_all_at_the_end_leave_memory_a_page_at_a_time(tmp_path):
    """Identical top-level ops: the detector confirms its unit only at the end and finds
    every boundary at once; the engine's per-iteration state goes to its file as they come,
    not after the last one (1 M such iterations held 2 GB)."""
    made = []

    def paged():
        made.append(PagedList(str(tmp_path), page_items=8, resident_pages=2))
        return made[-1]

    splitter = Splitter(SplitOptions(keep_events=False), per_iteration=paged)
    n = 400
    for i in range(n):
        splitter.feed({"ph": "X", "cat": "cpu_op", "name": "train_step", "pid": 1, "tid": 1,
                       "ts": 6 * i, "dur": 5})
    assert not splitter.iterations  # nothing confirmed while reading
    splitter.end_of_input()
    assert len(splitter.iterations) == n
    records, facts, breakdowns = made
    for kept in (records, breakdowns):  # at most the resident pages and the one being
        assert kept.pages_written >= n // 8 - 3  # filled in memory
    assert not facts  # no op told a phase: no phase facts kept (``Splitter._observe_phase``)
    while splitter.decided().more:
        pass
    assert [r.events for r in splitter.iterations] == [1] * n
