"""Online for real: each boundary comes out the moment the next iteration's first op is read,
a provisional boundary that later events disprove is revised in the record stream, and a
live replay (a real pipe, a growing file) ends with the split of the finished file."""
import pytest
from hypothesis import example, given, settings, strategies as st

from stream_split.core import Revision, Splitter, SplitOptions
from stream_split.core.detect import DetectorResult, FoundBoundary, RetractLast, structure
from stream_split.core.records import apply_revision
from stream_split.core.detect.matcher import RootMatcher
from stream_split.core.detect.search import OPENS_AFTER_SYNC, Unit
from stream_split.core.detect.skeleton import Node as _Node
from stream_split.native import NATIVE
from stream_split.schema import record_message
from stream_split.testing.generate import generate
from stream_split.testing.replay import FIRST_SCORED, SCENARIOS, live_trace, replay

#: Every loop shape is confirmed online (nested roots inside their container).
ONLINE = list(SCENARIOS)


@pytest.mark.parametrize("name", ONLINE)
def test_each_boundary_comes_out_when_its_first_op_is_read(name):
    scenario, params = SCENARIOS[name]
    lines, first_ops, _ = live_trace(scenario, params, seed=1)
    events = generate(scenario, seed=1, layout="time", **params).events
    splitter = Splitter(SplitOptions(keep_events=False))
    late = []
    for n, event in enumerate(events):
        splitter.feed(event)
        out = {round(r.start_ts * 1000) for r in splitter.pop_records()
               if r.__class__.__name__ == "Boundary"}
        if n in first_ops and first_ops[n] not in out:
            late.append(n)
    assert len(first_ops) >= 4 and not late


@pytest.mark.parametrize("name", ONLINE)
def test_sparing_the_searches_no_exact_instances_could_confirm_changes_no_boundary(
        name, monkeypatch):
    # the online tries with ``verdict.exact_needed`` and without it (every search chooses
    # and opens its unit): the same records, out at the same events
    scenario, params = SCENARIOS[name]
    events = generate(scenario, seed=1, layout="time", **params).events

    def records():
        splitter = Splitter(SplitOptions(keep_events=False))
        out = []
        for n, event in enumerate(events):
            splitter.feed(event)
            out += [(n, record) for record in splitter.pop_records()]
        splitter.close()
        return out + [(len(events), record) for record in splitter.pop_records()]

    spared = records()
    monkeypatch.setattr(structure, "exact_needed", lambda *args: 0)
    assert records() == spared


def _nodes(syms, t0=0.0):
    return [_Node(s, t0 + 10 * i, t0 + 10 * i + 5, 0) for i, s in enumerate(syms)]


def _matcher(level):
    # Instances A B C (A opens each, B is the anchor, A the head before it).
    unit = Unit(positions=[0, 3, 6], pattern=(0, 1, 2), similarity=[1.0] * 3, like=3,
                fragments=0, coverage=1.0, anchor=1, shapes=[0, 0, 0], exact=3,
                head=frozenset({0, 1}))
    return RootMatcher(("p", "t"), level, unit, ["A", "B", "C", "X"])


def test_the_first_op_is_the_boundary_and_the_anchor_confirms_it():
    matcher = _matcher(_nodes([0, 1, 2] * 3))
    found = matcher.push(_Node(0, 100, 101, 0))
    assert [f.first_op for f in found] == ["A"] and not found[0].moves_last
    assert matcher.push(_Node(1, 102, 103, 0)) == ()  # confirmed: nothing more to say


def test_a_first_op_that_no_anchor_follows_is_retracted():
    matcher = _matcher(_nodes([0, 1, 2] * 3))
    matcher.push(_Node(0, 100, 101, 0))
    again = matcher.push(_Node(0, 110, 111, 0))  # a second A before any B
    assert isinstance(again[0], RetractLast) and again[1].start_ts == 110
    matcher.push(_Node(0, 120, 121, 0))
    shapes, _, revisions = matcher.finish()  # the input ends before its B
    assert len(revisions) == 1 and isinstance(revisions[0], RetractLast)
    assert len(shapes) == 3  # every A without a B went back to the instance before it


def test_an_instance_that_begins_after_its_first_op_moves_the_boundary():
    matcher = _matcher(_nodes([0, 1, 2] * 3))
    matcher.push(_Node(0, 100, 101, 0))
    matcher.push(_Node(3, 102, 103, 0))  # X: not head; the instance begins after it
    found = matcher.push(_Node(1, 104, 105, 0))
    assert len(found) == 1 and found[0].moves_last and found[0].start_ts == 104


def _decided(events):
    splitter = Splitter(SplitOptions(keep_events=False))
    for event in events:
        splitter.feed(event)
    splitter.close()
    return splitter


@pytest.mark.parametrize("seed", range(3))
def test_nested_roots_are_confirmed_online_inside_their_container(seed):
    # Failure mode 3: the steps run inside serve_forever > engine_loop > run_engine; the
    # minor roots at the top level only come at the end. Each step copies its input to the
    # device first: a step, not a layer.
    trace = generate("deep_roots", seed=seed, layout="time", inner_steps=6, minor_roots=3)
    splitter = _decided(trace.events)
    assert splitter.evidence["decided"].startswith("online")
    assert "copying its input" in splitter.evidence["why"]
    assert [it.start_ts for it in splitter.iterations] == [
        it.start_ts for it in _decided(generate("deep_roots", seed=seed, inner_steps=6,
                                                minor_roots=3).events).iterations]


@pytest.mark.parametrize("seed", range(3))
def test_without_a_data_loader_the_loop_is_confirmed_online_after_the_host_sync(seed):
    trace = generate("noisy_training", seed=seed, fetch=False, layout="time")
    splitter = _decided(trace.events)
    assert splitter.evidence["decided"].startswith("online")
    assert splitter.evidence["phase"] == OPENS_AFTER_SYNC
    assert [it.start_ts for it in splitter.iterations] == [
        it.start_ts for it in _decided(generate("noisy_training", seed=seed,
                                                fetch=False).events).iterations]


def test_after_a_host_sync_the_instance_begins_at_the_small_ops_that_follow_it():
    # Instances: S (the sync, long) then small X, then the anchor B and C. Each instance
    # begins at X, right after the previous sync (as search._begin_at cuts at close).
    names = ["aten::item", "X", "B", "C"]
    level = []
    t = 0.0
    for _ in range(3):
        for sym, dur in ((1, 1), (2, 40), (3, 40), (0, 30)):
            level.append(_Node(sym, t, t + dur, 0))
            t += dur + 1
    unit = Unit(positions=[0, 4, 8], pattern=(1, 2, 3, 0), similarity=[1.0] * 3, like=3,
                fragments=0, coverage=1.0, anchor=2, shapes=[0, 0, 0], exact=3,
                opening=OPENS_AFTER_SYNC)
    matcher = RootMatcher(("p", "t"), level, unit, names)
    matcher.push(_Node(1, t, t + 1, 0))  # X, small: not yet a boundary
    found = matcher.push(_Node(2, t + 2, t + 42, 0))  # B: the instance began at X
    assert [f.start_ts for f in found] == [t]


class _ScriptedDetector:
    """A detector whose answers are given per event (the detector protocol, no heuristics)."""
    name = "scripted"
    wants_evidence = False
    fast_read = None  # (the contract's: no op read in one call)

    def __init__(self, script):
        self.script = script
        self.n = 0

    def observe(self, thread, stack, start, end, name, section):
        self.n += 1
        return self.script.get(self.n, ())

    def observe_frame(self, *args):
        pass

    def observe_launch(self, *args):
        pass

    def observe_gpu_work(self, *args):
        pass

    def close(self):
        return DetectorResult(boundaries=self.script.get("close", []), last_end=100.0)


def test_a_detector_of_the_callers_own_without_fast_read_still_splits():
    """``fast_read`` joined the detector contract in session 46: a detector written before
    it is given ``fast_read = None`` and its ops are observed as before."""
    t = (1, 1)
    script = {1: (FoundBoundary(0.0, t, "a"),), 3: (FoundBoundary(20.0, t, "a"),)}

    class Plain:  # no fast_read at all
        name, wants_evidence = "plain", False
        observe = _ScriptedDetector.observe
        observe_frame = observe_launch = observe_gpu_work = _ScriptedDetector.observe_frame
        close = _ScriptedDetector.close

        def __init__(self, script):
            self.script, self.n = script, 0

    detector = Plain(script)
    splitter = Splitter(SplitOptions(), detector=detector)
    records = []
    for e in [_op(0, "a"), _op(10), _op(20, "a"), _op(30)]:
        splitter.feed(e)
        records += splitter.pop_records()
    splitter.close()
    records += splitter.pop_records()
    assert detector.fast_read is None and detector.n == 4
    assert [r.start_ts for r in splitter.iterations] == [0.0, 20.0]


def test_a_detector_with_slots_and_no_fast_read_is_refused_by_name():
    class Slotted:
        __slots__ = ("n",)
    with pytest.raises(TypeError, match="Slotted has no attribute fast_read"):
        Splitter(SplitOptions(), detector=Slotted())


def _op(ts, name="op"):
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": 1, "pid": 1, "tid": 1}


def test_the_engine_applies_a_retraction_and_a_move_and_conserves_every_event():
    t = (1, 1)
    script = {1: (FoundBoundary(0.0, t, "a"),), 3: (FoundBoundary(20.0, t, "a"),),
              5: (RetractLast("no anchor"), FoundBoundary(40.0, t, "a")),
              6: (FoundBoundary(52.0, t, "b", moves_last=True),)}
    events = [_op(0, "a"), _op(10), _op(20, "a"), _op(30), _op(40, "a"), _op(52, "b"),
              _op(60), _op(70)]
    splitter = Splitter(SplitOptions(), detector=_ScriptedDetector(script))
    records = []
    for e in events:
        splitter.feed(e)
        records += splitter.pop_records()
    splitter.close()
    records += splitter.pop_records()
    revisions = [r for r in records if isinstance(r, Revision)]
    assert [(r.index, r.action) for r in revisions] == [(1, "retract"), (1, "move")]
    boundaries = []
    for r in records:
        d = r.to_dict()
        if d["type"] == "boundary":
            boundaries.append(d)
        elif d["type"] == "revision":
            boundaries = apply_revision(boundaries, d)
    assert [b["start_ts"] for b in boundaries] == [it.start_ts for it in splitter.iterations] \
        == [0.0, 52.0]
    owners = [o for o, _ in splitter.pop_assigned()]
    assert sorted(owners) == [0, 0, 0, 0, 0, 1, 1, 1]
    assert splitter.events_out == len(events)
    assert record_message(revisions[0]).WhichOneof("body") == "revision"


class _TentativeLast(_ScriptedDetector):
    """Its latest boundary may be retracted (a trigger its anchor has not confirmed)."""
    revisable = True


def _frame(ts, dur, name):
    return {"ph": "X", "cat": "python_function", "name": name, "ts": ts, "dur": dur, "pid": 1,
            "tid": 1}


def test_frames_that_come_after_the_ops_open_their_step_but_not_a_step_retracted():
    # Kineto's layout: the ops, then the frames. Step 1's opener (15-35) and the RNG call in
    # it before the first op are step 1's; the latest boundary (40) is a trigger that is
    # retracted at the end: the frame before it stays with step 1 and no frame was its.
    t = (1, 1)
    script = {1: (FoundBoundary(0.0, t, "a", opens_after=float("-inf")),),
              2: (FoundBoundary(20.0, t, "a", opens_after=11.0),),
              3: (FoundBoundary(40.0, t, "a", opens_after=31.0),),
              "close": [RetractLast("no anchor followed it")]}
    events = [_op(0, "a"), _op(10), _op(20, "a"), _op(30), _op(40, "a"),
              _frame(15, 20, "training_step"), _frame(16, 1, "random"),
              _frame(35, 25, "validate"), _frame(36, 1, "random")]
    splitter = Splitter(SplitOptions(), detector=_TentativeLast(script))
    for e in events:
        splitter.feed(e)
    splitter.close()
    owners = [o for o, _ in splitter.pop_assigned()]
    assert sorted(owners) == [0, 0, 1, 1, 1, 1, 1, 1, 1]
    assert [it.start_ts for it in splitter.iterations] == [0.0, 15.0]


@pytest.mark.parametrize("mode", ["pipe", "follow"])
def test_a_live_replay_is_on_time_and_ends_as_the_split_of_the_finished_file(mode, tmp_path):
    # A generous wait: "on time" means before the writer's next event, not within a time.
    result = replay("training", seed=0, mode=mode, timeout=20.0, work_dir=str(tmp_path))
    assert result.scored >= 10 - FIRST_SCORED - 1 and result.missing == 0
    assert result.on_time == result.scored
    assert result.final_equals_file


@pytest.mark.parametrize("seed", range(4))
def test_a_loop_of_one_op_instances_is_matched_as_the_general_path_measures_it(seed):
    # ``RootMatcher.push``'s case for a one-op instance (field by field against the one
    # measured before, its list reused, the latest first ops a bounded deque): a boundary
    # at each op, each instance's shape and similarity those of ``shape_and_similarity``
    # on it alone, and the typical first ops the latest ones
    import random
    from stream_split.core.detect.rules import RULES
    from stream_split.core.detect.search import shape_and_similarity
    rng = random.Random(seed)
    ops = [_Node(0, 10 * i, 10 * i + rng.choice((5, 5, 5, 7)), 0) for i in range(300)]
    unit = Unit(positions=[0, 1, 2], pattern=(0,), similarity=[1.0] * 3, like=3,
                fragments=0, coverage=1.0, anchor=0, shapes=[0, 0, 0], exact=3,
                head=frozenset({0}))
    matcher = RootMatcher(("p", "t"), ops[:3], unit, ["A"])
    for before, node in zip(ops[2:], ops[3:]):
        found = matcher.push(node)
        assert [(f.start_ts, f.first_op, f.opens_after) for f in found] == [
            (node.start, "A", before.end)]
    shapes, _, _ = matcher.finish()
    measured = [shape_and_similarity([node], matcher.unit) for node in ops]
    assert list(shapes) == [shape for shape, _ in measured]
    assert list(matcher.similarity) == [sim for _, sim in measured]
    assert list(matcher.starts) == ops[-RULES.online.typical_of:]


# ``matcher.anchor_after_alike`` (``RootMatcher.push``'s case of a loop of one-op instances)
# against ``_native.anchor_after_alike``: matchers pushed the same ops, anchors or not, alike
# or not, with Python frames waiting or opening ops, answer and hold the same


def _pushed(ops, opening, fast, monkeypatch) -> tuple:
    """What a matcher of one-op instances answers to ``ops`` and holds, ``fast`` its
    ``anchor_after_alike``."""
    from stream_split.core.detect import matcher as matcher_module
    monkeypatch.setattr(matcher_module, "_anchor_after_alike", fast)
    unit = Unit(positions=[0, 1, 2], pattern=(0,), similarity=[1.0] * 3, like=3,
                fragments=0, coverage=1.0, anchor=0, shapes=[0, 0, 0], exact=3,
                head=frozenset({0}))
    matcher = RootMatcher(("p", "t"), _nodes([0, 0, 0]), unit, ["A", "B"],
                          opening=[(25 + 10 * k, "zero_grad") for k in opening])
    answers = []
    t = 30
    for sym, took, frame in ops:
        if frame:
            matcher.observe_frame(t - 1, t + took + 1, "training_step")
        answers.append(matcher.push(_Node(sym, t, t + took, 0)))
        t += 10
    held = (matcher._alike, [n.start for n in matcher.current],
            [n.start for n in matcher.starts], [n.start for n in matcher.recent],
            matcher.shortest, matcher.measured)
    shapes, end, revisions = matcher.finish()
    return answers, held, list(shapes), list(matcher.similarity), end, revisions


@pytest.mark.skipif(NATIVE is None, reason="stream_split._native is not built")
@settings(max_examples=150, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from([0, 0, 0, 1]), st.sampled_from([5, 5, 7]),
                              st.sampled_from([False] * 9 + [True])), max_size=40),
       opening=st.lists(st.integers(0, 40), max_size=3))
def test_a_native_one_op_anchor_is_matched_as_the_python_one(ops, opening):
    from stream_split.core.detect import matcher as matcher_module
    with pytest.MonkeyPatch.context() as monkeypatch:
        python = _pushed(ops, opening, matcher_module.anchor_after_alike, monkeypatch)
    with pytest.MonkeyPatch.context() as monkeypatch:
        native = _pushed(ops, opening, NATIVE.anchor_after_alike, monkeypatch)
    assert native == python


# ``structure.top_op_matched`` (a top-level op of a matched loop of one-op iterations read in
# one call) and ``structure.step_op_read`` (an op read in one call once the steps are the
# loop) against their ``_native`` twins and against the general way (each op through
# ``ThreadStacks.push`` and ``StructureDetector.observe``): a splitter fed a loop learnt, then
# ops of every kind (nested, overlapping, of another thread or name, back in time, longer, a
# step) answers the same records


#: The loop learnt before the ops drawn (the structure detector confirms it online by then).
_LEARNT_OPS = 1300


def _records_read(tail, reader: str, read, monkeypatch, steps: bool = False) -> list:
    """The records of a splitter fed a loop learnt (``_LEARNT_OPS`` one-op iterations, or
    ``steps``: ``ProfilerStep#N`` spans of one op each) and ``tail``, ``read`` its detector's
    one call (``structure``'s ``reader``, ``read_top_op`` or ``read_step_op``)."""
    monkeypatch.setattr(structure, reader, read)
    splitter = Splitter(SplitOptions(keep_events=False))
    records = []

    def feed(name, ts, dur, tid=1, cat="cpu_op"):
        splitter.feed({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts,
                       "dur": dur})
        records.extend(r.to_dict() for r in splitter.pop_records())

    t, numbers = 0.0, iter(range(10 ** 6))
    loop = (lambda: f"ProfilerStep#{next(numbers)}") if steps else (lambda: "train_step")
    for _ in range(40 if steps else _LEARNT_OPS):
        feed(loop(), t, 5, cat="user_annotation" if steps else "cpu_op")
        if steps:
            feed("aten::mm", t + 1, 2)
        t += 6
    for kind, took in tail:
        if kind == "nested":  # a child of the op before
            feed("aten::mm", t - took - 0.5, min(took, 0.25))
            continue
        if kind == "overlapping":  # begins before the op before ends
            t -= 1.5
        elif kind == "back":  # back in time: a new section of the thread
            t -= 40
        name = {"other": "optimizer.step", "step": "ProfilerStep#7"}.get(kind) or loop()
        feed(name, t, took, tid=2 if kind == "thread" else 1)
        t += took + 1
    splitter.close()
    return records + [r.to_dict() for r in splitter.pop_records()]


_TAIL = st.lists(st.tuples(
    st.sampled_from(["loop"] * 8 + ["nested", "overlapping", "other", "thread", "back", "step"]),
    st.sampled_from([5, 5, 5, 7, 0.5])), max_size=30)
#: Three iterations of the loop, around each op of another kind in the examples.
_LOOP = [("loop", 5)] * 3


def _read_alike(tail, reader: str, python, native, steps: bool = False) -> None:
    """The records of ``tail`` (``_records_read``) read the general way, by ``python`` and
    by ``native`` (where built): the same."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        general = _records_read(tail, reader, lambda *op: None, monkeypatch, steps)
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert _records_read(tail, reader, python, monkeypatch, steps) == general
    if NATIVE is not None:
        with pytest.MonkeyPatch.context() as monkeypatch:
            assert _records_read(tail, reader, getattr(NATIVE, native), monkeypatch,
                                 steps) == general


@settings(max_examples=25, deadline=None)
@given(tail=_TAIL)
@example(tail=_LOOP + [("overlapping", 0.5)] + _LOOP)  # a loop op nested in the one before
@example(tail=_LOOP + [("back", 5)] + _LOOP)  # a new section of the thread
@example(tail=_LOOP + [("thread", 5)] + _LOOP + [("nested", 5), ("loop", 7)] + _LOOP)
def test_a_matched_top_level_op_read_in_one_call_answers_as_read_op_by_op(tail):
    _read_alike(tail, "read_top_op", structure.top_op_matched, "top_op_matched")


@settings(max_examples=40, deadline=None)
@given(tail=_TAIL)
@example(tail=_LOOP + [("overlapping", 7)] + _LOOP)  # a step overlapping the one before
@example(tail=_LOOP + [("back", 5)] + _LOOP)  # a new section of the thread
@example(tail=_LOOP + [("thread", 5), ("overlapping", 0.5), ("nested", 5)] + _LOOP)
def test_an_op_read_in_one_call_once_the_steps_are_the_loop_answers_as_op_by_op(tail):
    _read_alike(tail, "read_step_op", structure.step_op_read, "step_op_read", steps=True)


@pytest.mark.parametrize("reader, steps", [("read_top_op", False), ("read_step_op", True)])
def test_the_loops_are_read_in_one_call_an_op(reader, steps, monkeypatch):
    """A loop of one-op iterations matched, and steps that are the loop, take the one call
    (not only the general way)."""
    taken, read = [], getattr(structure, reader)

    def counted(*op):
        found = read(*op)
        taken.append(found is not None)
        return found

    _records_read([("loop", 5)] * 10, reader, counted, monkeypatch, steps)
    assert sum(taken) >= 10 and all(taken[-10:])
