"""An op read in one call while the structure detector learns, or once it matches a unit of more
than one op (``structure.learning_op_read``, ``matching_op_read``: ``StructureDetector.fast_read``
in those modes) reads as the general way (each op through ``ThreadStacks.push`` and
``StructureDetector.observe``), and so do their native twins, which answer a side thread's ops
while learning (under its top-level op: ``ThreadSkeleton.skips_below``'s case; at its top level:
``Skeletons.add``'s) and the ops under an op of the row matched (``Skeletons.on_row``'s case)
without calling ``_observe_learning`` or ``_observe_matching``: the same records and evidence
on generated training runs and on random streams of nested ops of a main thread and side
threads (sections, steps, a side thread's top level full or not), read through the decoder and
the feed lane (``held48_read`` calls the readers) and op by op (``Splitter._read_op`` calls
them), and in a fresh process; and the native readers do take those cases (the Python
methods are called for a small part of the ops)."""
import json
import os
import subprocess
import sys

import pytest
from hypothesis import example, given, settings, strategies as st

from stream_split.core import SplitOptions, Splitter
from stream_split.core.detect import skeleton, structure
from stream_split.core.detect.rules import RULES
from stream_split.core.stack import ThreadStacks
from stream_split import native
from stream_split.native import NATIVE
from stream_split.run import read_through
from stream_split.testing.generate import generate, render

needs_native = pytest.mark.skipif(NATIVE is None, reason="stream_split._native is not built")

#: The readers compared, (learning's, matching's) each: the general way (None: the engine
#: pushes the op and calls ``observe``), the Python fallbacks, and the native readers where
#: they are built.
_READERS = {"general": (lambda *op: None,) * 2,
            "python": (structure.learning_op_read, structure.matching_op_read)}
if NATIVE is not None:
    _READERS["native"] = (NATIVE.learning_op_read, NATIVE.matching_op_read)


def _counted(monkeypatch, readers: tuple, side_roots: int | None = None) -> dict:
    """``readers`` made the detector's while it learns and once it matches
    (``structure.read_learning_op``, ``read_matching_op``), and the calls of
    ``_observe_learning`` and ``_observe_matching`` counted: the dict that counts them.
    ``side_roots``: ``MemoryRules.side_thread_roots`` where not the default."""
    calls = {"_observe_learning": 0, "_observe_matching": 0}
    if side_roots is not None:
        rules = RULES._replace(memory=RULES.memory._replace(side_thread_roots=side_roots))
        monkeypatch.setattr(skeleton, "RULES", rules)
        monkeypatch.setattr(structure, "RULES", rules)
    monkeypatch.setattr(structure, "read_learning_op", readers[0])
    monkeypatch.setattr(structure, "read_matching_op", readers[1])
    for method in calls:
        def counted(self, *op, observe=getattr(structure.StructureDetector, method),
                    method=method):
            calls[method] += 1
            return observe(self, *op)
        monkeypatch.setattr(structure.StructureDetector, method, counted)
    return calls


def _read_file(path, readers: tuple, side_roots: int | None = None) -> tuple:
    """(the records, the evidence, the calls of ``_observe_learning`` and
    ``_observe_matching``) of the trace at ``path`` read through the decoder and the feed
    lane, ``readers`` the detector's (``side_roots``: as ``_counted`` takes it)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        calls = _counted(monkeypatch, readers, side_roots)
        splitter = Splitter(SplitOptions(keep_events=False))
        assert read_through(str(path), splitter).error is None
        return [r.to_dict() for r in splitter.iterations], splitter.evidence, calls


@pytest.mark.parametrize("scenario, params", [
    ("training", {"annotate_steps": False}), ("training", {"annotate_steps": False, "seed": 3}),
    ("noisy_training", {}), ("deep_roots", {}), ("sample", {})])
def test_a_generated_trace_is_read_alike_by_each_reader(scenario, params, tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(render(generate(scenario, **params), "object", True))
    general = _read_file(path, _READERS["general"])
    assert general[0]  # (iterations found)
    for name in ("python", "native")[:len(_READERS) - 1]:
        assert _read_file(path, _READERS[name])[:2] == general[:2], name


@needs_native
@pytest.mark.parametrize("main", [False, True])
def test_the_native_reader_answers_a_side_threads_nested_ops_itself(main, tmp_path):
    """A side thread's ops, under its top-level ops (an autograd thread's backward) and at
    its top level, read while the detector learns (it learns to the end: no main thread, or
    one whose ops never repeat): answered in C, not by ``_observe_learning``."""
    events = [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 7,
               "ts": 100.0 * k + at, "dur": dur}
              for k in range(300) for name, at, dur in (
                  ("autograd::engine::evaluate_function", 0, 90), ("aten::mm", 1, 20),
                  ("aten::add", 30, 20), ("aten::copy_", 31, 2), ("aten::sum", 60, 20))]
    if main:  # (before the side thread's: Kineto writes each thread's ops in one run)
        events[:0] = [{"ph": "X", "cat": "cpu_op", "name": "".join(
            chr(97 + k // 26 ** i % 26) for i in range(3)), "pid": 1, "tid": 1,
            "ts": 100.0 * k, "dur": 90} for k in range(300)]
    path = tmp_path / "trace.json"
    path.write_text(render_events(events))
    general = _read_file(path, _READERS["general"])
    native = _read_file(path, _READERS["native"])
    assert native[:2] == general[:2]
    # (by ``_observe_learning``: the main thread's ops, and a side thread's first op and its
    # first of each name)
    assert general[2]["_observe_learning"] == len(events)
    assert native[2]["_observe_learning"] <= 300 * main + 5


@needs_native
@pytest.mark.parametrize("scenario, params", [("training", {"annotate_steps": False}),
                                              ("noisy_training", {})])
def test_the_native_reader_answers_the_ops_under_the_row_matched_itself(scenario, params,
                                                                         tmp_path):
    """A training run without step annotations, its loop confirmed online (a unit of more
    than one top-level op: read by ``_observe_matching``): the ops under the row's ops are
    answered in C once it matches, not by ``_observe_matching``."""
    path = tmp_path / "trace.json"
    path.write_text(render(generate(scenario, steps=24, **params), "object", True))
    general = _read_file(path, _READERS["general"])
    native = _read_file(path, _READERS["native"])
    assert len(general[0]) == 24 and native[:2] == general[:2]
    matched = general[2]["_observe_matching"]
    assert matched > 2000 and native[2]["_observe_matching"] * 3 < matched


@needs_native
@pytest.mark.parametrize("max_roots", [None, 256])
@pytest.mark.parametrize("kinds", [300, 3000])
def test_the_native_reader_reads_a_main_threads_top_level_ops_itself(max_roots, kinds,
                                                                      tmp_path):
    """A main thread's top-level ops while the detector learns: names drawn at random
    (``testing.attacks.random_names``: online tries due, none believed; a few names a
    marker), or each name its own (``kinds`` as many as the ops), the top level past
    ``max_roots`` (searched there, then its oldest ops forgotten) or not; then a loop, found
    online. Read in C (learn53: ``root_op``, and the detector's methods only where due), not
    by ``_observe_learning``; the records and the evidence as the general way's."""
    import random
    rnd = random.Random(kinds)
    names = [f"op_{j}" if j % 97 else f"get_batch_{j}" for j in range(kinds)]
    drawn = [rnd.choice(names) for _ in range(3000)]
    loop = ["fetch_batch", "forward", "backward", "Optimizer.step#SGD.step"] * 40
    events = [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1,
               "ts": 10.0 * k, "dur": 8} for k, name in enumerate(drawn + loop)]
    path = tmp_path / "trace.json"
    path.write_text(render_events(events))
    with pytest.MonkeyPatch.context() as monkeypatch:
        if max_roots is not None:
            rules = RULES._replace(memory=RULES.memory._replace(max_roots=max_roots))
            monkeypatch.setattr(skeleton, "RULES", rules)
            monkeypatch.setattr(structure, "RULES", rules)
        general = _read_file(path, _READERS["general"])
        native = _read_file(path, _READERS["native"])
    assert native[:2] == general[:2] and len(general[0]) > 30  # (the loop's iterations)
    # (the general way reads every op while learning: all of them, or up to the search at
    # ``max_roots`` where that believes a unit)
    assert native[2]["_observe_learning"] <= 5 and general[2]["_observe_learning"] > 250


# Random streams: ops of a main thread (pid == tid) and two side threads, each op nested in
# its thread's open ops or not, some back in time (a new section of the thread, or an op
# the order holds), some ``ProfilerStep#N``; fed event by event (``Splitter.feed``: the
# engine's ``_read_op`` calls the reader) and as checked batches (the feed lane's
# ``held48_read`` calls it).

_THREADS = ((1, 1), (1, 7), (2, 9))
_NAMES = ("aten::mm", "aten::add", "autograd::engine::evaluate_function", "train_step",
          "layer_3", "ProfilerStep#{}")


def _stream(ops: list) -> list:
    """The events of ``ops``: (thread pick, how it opens, name pick, duration pick) each."""
    events, clock, open_ = [], {}, {}
    for k, (pick, how, name_pick, took) in enumerate(ops):
        pid, tid = _THREADS[pick]
        at = clock.get(pick, 1000.0) + 1
        stack = open_.setdefault(pick, [])
        cat = "cpu_op"
        if how == "child" and stack:  # inside the innermost open op
            start, end = stack[-1]
            at, dur = max(at, start + 0.25), min(took, (end - max(at, start + 0.25)) / 2)
        elif how == "back":  # back in time: another category (a section), or held
            at, dur, cat = at - 300, took, ("user_annotation" if k % 2 else "cpu_op")
            stack.clear()
        else:
            dur = 40 * took
            stack.clear()
        if dur <= 0:
            dur, stack[:] = took, []
        stack.append((at, at + dur))
        clock[pick] = at
        name = _NAMES[name_pick].format(k)
        events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": at,
                       "dur": dur})
    return events


def _fed(events: list, readers: tuple, batches: bool, side_roots: int, tmp_path) -> tuple:
    """(the records, the evidence) of ``events`` fed one by one, or (``batches``) read from
    a file through the decoder and the feed lane, ``readers`` the detector's
    (``side_roots``: as ``_counted`` takes it)."""
    if batches:
        path = tmp_path / "stream.json"
        path.write_text(render_events(events))
        return _read_file(path, readers, side_roots)[:2]
    with pytest.MonkeyPatch.context() as monkeypatch:
        _counted(monkeypatch, readers, side_roots)
        splitter = Splitter(SplitOptions(keep_events=False))
        for event in events:
            splitter.feed(dict(event))
        splitter.close()
        return [r.to_dict() for r in splitter.iterations], splitter.evidence


def render_events(events: list) -> str:
    """A trace file of ``events`` (Chrome's object form)."""
    return json.dumps({"traceEvents": events})


_OPS = st.lists(st.tuples(st.sampled_from([0, 0, 1, 1, 1, 2]),
                          st.sampled_from(["top", "child", "child", "child", "back"]),
                          st.sampled_from([0, 0, 1, 2, 3, 4, 5]),
                          st.sampled_from([1, 2, 5])), min_size=1, max_size=150)
#: A loop of the main thread, its backward on a side thread under one op (the tile's shape).
_LOOP = [(0, "top", 3, 5), (1, "top", 2, 5), (1, "child", 0, 2), (1, "child", 1, 1),
         (1, "child", 0, 1)] * 12


@settings(max_examples=60, deadline=None)
@given(ops=_OPS, batches=st.booleans(), side_roots=st.sampled_from([None, 3]))
@example(ops=_LOOP, batches=True, side_roots=None)
@example(ops=_LOOP + [(1, "back", 0, 2), (1, "child", 1, 1)] + _LOOP, batches=False,
         side_roots=3)
def test_random_streams_are_read_alike_by_each_reader(ops, batches, side_roots,
                                                      tmp_path_factory):
    """(``side_roots``: a side thread's top level full after 3 ops, or not.)"""
    tmp_path = tmp_path_factory.mktemp("stream")
    events = _stream(ops)
    general = _fed(events, _READERS["general"], batches, side_roots, tmp_path)
    for name in ("python", "native")[:len(_READERS) - 1]:
        assert _fed(events, _READERS[name], batches, side_roots, tmp_path) == general, name


#: A fresh process feeds the events on stdin one by one (``Splitter.feed``: ``_read_op`` calls
#: the readers before the feed lane ever runs) and prints the records, which readers it took.
_FRESH = """
import json, sys
from stream_split.core import SplitOptions, Splitter
from stream_split.core.detect import structure
splitter = Splitter(SplitOptions(keep_events=False))
for event in json.loads(sys.stdin.read())["traceEvents"]:
    splitter.feed(event)
splitter.close()
print(json.dumps([structure.read_learning_op.__module__, structure.read_matching_op.__module__,
                  [r.to_dict() for r in splitter.iterations]]))
"""


@needs_native
@pytest.mark.parametrize("scenario", ["training", "sample"])
def test_a_fresh_process_reads_alike_with_the_native_readers_and_without(scenario):
    """Each native reader sets up the names and layouts it reads itself: its first call, in
    a fresh process, before any other native part read an op, reads as the fallbacks do."""
    params = {"annotate_steps": False} if scenario == "training" else {}
    text = render(generate(scenario, **params), "object", True)
    out = []
    for value in ("", "1"):
        env = {**os.environ, native.NO_NATIVE_ENV: value}
        done = subprocess.run([sys.executable, "-c", _FRESH], input=text, env=env,
                              capture_output=True, text=True, check=True)
        out.append(json.loads(done.stdout))
    (native_module, _, native_records), (fallback_module, _, fallback_records) = out
    assert native_module != fallback_module == structure.__name__
    assert native_records and native_records == fallback_records


#: A child that reads a side thread's ops natively, gives the reader once a skeleton of
#: another class (a subclass with a slot of its own: its layout cannot be read), then the real
#: one again, and prints what the last reads answered.
_ANOTHER_CLASS = """
from stream_split.core.detect import skeleton
from stream_split.core.detect.structure import StructureDetector
from stream_split.core.stack import ThreadStacks
detector, stacks = StructureDetector(), ThreadStacks()
reader, state = detector.fast_read
for k in range(3):
    reader(stacks, state, (1, 7), "top", 100.0 * k, 100.0 * k + 50)
    reader(stacks, state, (1, 7), "kid", 100.0 * k + 1, 100.0 * k + 2)
latest = detector._skeletons.latest
class Other(skeleton.ThreadSkeleton):
    __slots__ = ("more",)
detector._skeletons.latest = Other.__new__(Other)
try:
    reader(stacks, state, (1, 9), "kid", 301.0, 302.0)
except AttributeError:
    pass
detector._skeletons.latest = latest
print(reader(stacks, state, (1, 7), "top", 300.0, 350.0),
      reader(stacks, state, (1, 7), "kid", 301.0, 302.0), len(latest.roots))
"""


@needs_native
def test_a_skeleton_of_another_class_leaves_the_native_readers_layouts_whole():
    """A layout not found for one object is not kept half-found: the next real skeleton is
    read at its own offsets (a failed look-up once left an offset of -1 behind, and the next
    op read the object at it: a crash)."""
    done = subprocess.run([sys.executable, "-c", _ANOTHER_CLASS], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["()", "()", "4"]


@needs_native
def test_a_bound_below_zero_keeps_no_side_roots_as_the_fallback_does(monkeypatch):
    """``MemoryRules.side_thread_roots`` below 0: a side thread's top-level ops are read
    natively as in Python (it was a ``SystemError``: the bound's -1 taken for an error)."""
    rules = RULES._replace(memory=RULES.memory._replace(side_thread_roots=-2))
    monkeypatch.setattr(skeleton, "RULES", rules)
    monkeypatch.setattr(structure, "RULES", rules)
    answers = {}
    for name, read in (("python", structure.learning_op_read),
                       ("native", NATIVE.learning_op_read)):
        detector, stacks = structure.StructureDetector(), ThreadStacks()
        state = detector.fast_read[1]
        assert state[3] == -2
        answers[name] = [read(stacks, state, (1, 7), "top", 100.0 * k, 100.0 * k + 50)
                         for k in range(4)] + [len(detector._skeletons.latest.roots)]
    assert answers["native"] == answers["python"]


@needs_native
def test_stacks_of_another_class_are_left_to_the_general_way():
    """The native readers read only ``ThreadStacks`` itself: other stacks get None (nothing
    done: the engine pushes the op and calls ``observe``), not an error."""
    class OtherStacks(ThreadStacks):
        pass

    detector = structure.StructureDetector()
    state = detector.fast_read[1]
    for read in (NATIVE.learning_op_read, NATIVE.matching_op_read):
        assert read(OtherStacks(), state, (1, 7), "op", 0.0, 1.0) is None
