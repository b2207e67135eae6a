"""A boundary's iteration opened in one call (``_native.open_iteration``, where built: the
common case of ``engine.Splitter._add_boundary`` up to its held events) leaves the splitter as
that method's code leaves it, its fallback: the same windows, records and breakdowns (their
host unions compacted alike), boundary records and decisions, in plain and paged lists."""
import json
import os
import pickle
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from stream_split import native
from stream_split.core import SplitOptions, Splitter, engine
from stream_split.pages import PagedList
from stream_split.testing.generate import generate

needs_native = pytest.mark.skipif(engine._open_iteration is None,
                                  reason="stream_split._native is not built")


def _split(events: list, per_iteration=list, keep: bool = True, batch: int = 0) -> tuple:
    """What a splitter fed ``events`` (``batch`` at a time, trimming its paged lists between
    batches; 0: one by one) hands out and keeps: each event's owner, the boundary records,
    each iteration's record and breakdown, and its windows."""
    splitter = Splitter(SplitOptions(keep_events=keep), per_iteration=per_iteration)
    pairs, records = [], []
    if batch:
        for at in range(0, len(events), batch):
            splitter.feed_batch(events[at:at + batch])
            pairs.extend(splitter.decided().pairs)
            records.extend(map(repr, splitter.pop_records()))
    else:
        for event in events:
            splitter.feed(event, json.dumps(event).encode())
    splitter.close()
    pairs.extend(splitter.pop_assigned())
    records.extend(map(repr, splitter.pop_records()))
    pairs = [(owner, event if event.__class__ is bytes else json.dumps(event))
             for owner, event in pairs]
    breakdowns = [pickle.dumps(breakdown) for breakdown in splitter._breakdowns]
    windows = splitter._windows
    return (pairs, records, [record.to_dict() for record in splitter.iterations], breakdowns,
            list(windows.starts), windows.latest_start)


def _both_ways(events: list, monkeypatch, **how) -> tuple:
    """``_split`` with and without ``open_iteration`` gives the same; returns how many
    boundaries the call opened (not None), and of them how many it decided the held events
    of too (True)."""
    opened = []

    def counted(*args):
        hot = engine._native.open_iteration(*args)
        opened.append(hot)
        return hot

    monkeypatch.setattr(engine, "_open_iteration", counted)
    made = _split(events, **how)
    monkeypatch.setattr(engine, "_open_iteration", None)
    assert made == _split(events, **how)
    return sum(hot is not None for hot in opened), sum(hot is True for hot in opened)


def _loop(iterations: int, inner: int, floats: bool, gap: int = 1) -> list:
    """A loop of ``iterations`` top-level ops on thread 1 with ``inner`` nested ops each (10
    or more: the host union of a thread compacted), and a side op on thread 2."""
    events, at = [], 0
    for k in range(iterations):
        ts = (lambda t: t + 0.25) if floats else (lambda t: t)
        events.append({"ph": "X", "cat": "cpu_op", "name": "train_step", "pid": 1, "tid": 1,
                       "ts": ts(at), "dur": 40 + 3 * inner})
        for n in range(inner):
            events.append({"ph": "X", "cat": "cpu_op", "name": "layer_op", "pid": 1, "tid": 1,
                           "ts": ts(at + 1 + 3 * n), "dur": 2})
        events.append({"ph": "X", "cat": "cpu_op", "name": "side_op", "pid": 1, "tid": 2,
                       "ts": ts(at + 2), "dur": 3})
        at += 41 + 3 * inner + gap + k % 3
    return events


def _paged(page_items: int, resident_pages: int):
    """A maker of small ``PagedList``s: a page appended to first, and trimmed, often."""
    return lambda: PagedList(page_items=page_items, resident_pages=resident_pages)


@needs_native
@given(st.integers(2, 60), st.sampled_from([0, 1, 9]), st.booleans(), st.booleans(),
       st.sampled_from([None, (1, 1), (3, 2), (8, 1)]), st.sampled_from([0, 7]))
@settings(max_examples=40, deadline=None)
def test_an_iteration_opened_in_one_call_is_opened_as_the_method_opens_it(
        iterations, inner, floats, keep, paged, batch):
    per_iteration = list if paged is None else _paged(*paged)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _both_ways(_loop(iterations, inner, floats), monkeypatch,
                   per_iteration=per_iteration, keep=keep, batch=batch)


@needs_native
@pytest.mark.parametrize("scenario, params", [
    ("layer_annotations", {}), ("idle_steps", {}), ("deep_roots", {}), ("warmup_root", {}),
    ("preamble", {}), ("training", {"steps": 6}), ("serving", {}), ("gpu_only", {})])
@pytest.mark.parametrize("paged", [False, True])
def test_generated_traces_are_split_alike_with_and_without_it(scenario, params, paged,
                                                              monkeypatch):
    """The four failure modes of PRODUCT.md (the first five), a loop and one with no
    boundary at all."""
    events = generate(scenario, seed=3, **params).events
    _both_ways(events, monkeypatch, per_iteration=_paged(2, 1) if paged else list)


#: Iterations enough for the matcher to confirm its unit online (some 1,240 one-op
#: iterations): from then on each boundary decides the items held one at a time.
_ONLINE = 1300


@needs_native
@pytest.mark.parametrize("keep", [False, True])
def test_a_loop_of_one_op_iterations_opens_each_iteration_in_one_call(keep, monkeypatch):
    opened, resolved = _both_ways(_loop(_ONLINE + 200, 0, True), monkeypatch, keep=keep)
    assert opened >= _ONLINE + 190  # (all but the first few)
    # once the unit is confirmed online, the held ops of each (held as their thread: raws
    # given) decided in the same call
    assert resolved >= 190


@needs_native
def test_a_boundary_leaves_held_events_it_cannot_own_to_the_method(monkeypatch):
    events = _loop(_ONLINE + 200, 0, True)
    for k, event in enumerate(events):  # a Python frame held among the ops: owned the
        if k % 50 == 1:  # general way (``_resolve_pending``), the ops before it in the call
            events.insert(k + 1, {**event, "cat": "python_function", "name": "f.py(1): g",
                                  "ts": event["ts"] + 1, "dur": 1})
    opened, resolved = _both_ways(events, monkeypatch)
    assert opened - resolved >= 4 and resolved >= 150


_OPENED_IN_A_FRESH_PROCESS = """
import json
from stream_split.core import SplitOptions, Splitter, engine
from stream_split.pages import PagedList
splitter = Splitter(SplitOptions(), per_iteration=lambda: PagedList(page_items=4))
for k in range(200):
    splitter.feed({"ph": "X", "cat": "cpu_op", "name": "step", "pid": 1, "tid": 1,
                   "ts": k * 10.5, "dur": 9})
splitter.close()
print(engine._open_iteration is None, json.dumps([r.to_dict() for r in splitter.iterations]),
      list(map(repr, splitter.pop_records())))
"""


@needs_native
def test_iterations_are_opened_alike_in_a_fresh_process_either_way():
    outs = [subprocess.run([sys.executable, "-c", _OPENED_IN_A_FRESH_PROCESS],
                           env={**os.environ, native.NO_NATIVE_ENV: off}, capture_output=True,
                           text=True, check=True).stdout.split(" ", 1) for off in ("", "1")]
    assert [out[0] for out in outs] == ["False", "True"]  # the call, then the method's code
    assert outs[0][1] == outs[1][1]
