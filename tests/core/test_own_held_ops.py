"""Held ops owned at a boundary in one call (``_native.own_held_ops``, where built: the common
case of ``engine.Splitter._own_each``) are owned as that method's loop owns them, its
fallback: the same owners, in the same order, and the same records and breakdowns."""
import json
import sys

import pytest
from hypothesis import given, settings, strategies as st

from stream_split.core import SplitOptions, Splitter, engine
from stream_split.testing.generate import generate

needs_native = pytest.mark.skipif(engine._own_held_ops is None,
                                  reason="stream_split._native is not built")


def _split(events: list, raws: bool, keep: bool = True) -> tuple:
    """(each event's owner as handed out, in order; each record's dict) of a splitter fed
    ``events`` (with their JSON as raw bytes where ``raws``)."""
    splitter = Splitter(SplitOptions(keep_events=keep))
    for event in events:
        splitter.feed(event, json.dumps(event).encode() if raws else None)
    splitter.close()
    pairs = [(owner, event if event.__class__ is bytes else json.dumps(event))
             for owner, event in splitter.pop_assigned()]
    return pairs, [record.to_dict() for record in splitter.iterations]


def _both_ways(events: list, monkeypatch, raws: bool = False, keep: bool = True) -> int:
    """``_split`` with and without ``own_held_ops`` gives the same; returns how many ops the
    call owned."""
    owned = []

    def counted(*args):
        owned.append(engine._native.own_held_ops(*args))
        return owned[-1]

    # (counted where ``_resolve_pending`` calls it: not inside ``_native.open_iteration``)
    monkeypatch.setattr(engine, "_open_iteration", None)
    monkeypatch.setattr(engine, "_own_held_ops", counted)
    native = _split(events, raws, keep)
    monkeypatch.setattr(engine, "_own_held_ops", None)
    assert native == _split(events, raws, keep)
    return sum(owned)


def _loop(iterations: int, inner: list, floats: bool, threads: int) -> list:
    """A loop of ``iterations`` top-level ops on thread 1 (``inner``: each one's nested ops,
    as (offset, duration)), and on other threads an op an iteration."""
    events, at = [], 0
    for k in range(iterations):
        ts = (lambda t: t + 0.25) if floats else (lambda t: t)
        events.append({"ph": "X", "cat": "cpu_op", "name": "train_step", "pid": 1, "tid": 1,
                       "ts": ts(at), "dur": 40})
        for offset, dur in inner:
            events.append({"ph": "X", "cat": "cpu_op", "name": "layer_op", "pid": 1, "tid": 1,
                           "ts": ts(at + offset), "dur": dur})
        for tid in range(2, 2 + threads):
            events.append({"ph": "X", "cat": "cpu_op", "name": "side_op", "pid": 1,
                           "tid": tid, "ts": ts(at + tid), "dur": 3})
        at += 41 + k % 3
    return events


@needs_native
@given(st.integers(4, 40), st.lists(st.tuples(st.integers(0, 38), st.integers(0, 6)),
                                    max_size=3).map(sorted),
       st.booleans(), st.integers(0, 2), st.booleans(), st.booleans())
@settings(max_examples=40, deadline=None)
def test_ops_owned_in_one_call_are_owned_as_the_loop_owns_them(iterations, inner, floats,
                                                               threads, raws, keep):
    with pytest.MonkeyPatch.context() as monkeypatch:
        owned = _both_ways(_loop(iterations, inner, floats, threads), monkeypatch, raws, keep)
    # (an event handed out itself is held itself, not as its thread: the loop owns it)
    assert owned > 0 or keep and not raws


@needs_native
@pytest.mark.parametrize("seed", [1, 7])
def test_a_generated_training_run_is_split_alike_with_and_without_it(seed, monkeypatch):
    _both_ways(generate("training", seed=seed, steps=6).events, monkeypatch, raws=True)


def _mixed_loop(iterations: int, later: list) -> list:
    """A loop of top-level ops on thread 1, each iteration with a side op on thread 2 held
    as its thread (the native call owns it), then what ``later`` says (``annotation``: a
    user annotation, held as its name; ``frame``: a Python frame; ``long``: an op that ends
    after the next boundary; ``op``: another side op; ``step``: a ``ProfilerStep#N``
    annotation, the iteration's N: one owned by the call), all on other threads: the call owns
    the head, the engine the rest (``Splitter._resolve_pending``)."""
    kinds = {"annotation": ("user_annotation", "mark", 3, 2),
             "step": ("user_annotation", "ProfilerStep#{k}", 3, 2),
             "frame": ("python_function", "f.py(1): g", 3, 2),
             "long": ("cpu_op", "long_op", 60, 4), "op": ("cpu_op", "side_op", 3, 5)}
    events, at = [], 0
    for k in range(iterations):
        events.append({"ph": "X", "cat": "cpu_op", "name": "train_step", "pid": 1, "tid": 1,
                       "ts": at, "dur": 40})
        events.append({"ph": "X", "cat": "cpu_op", "name": "side_op", "pid": 1, "tid": 2,
                       "ts": at + 2, "dur": 3})
        for n, kind in enumerate(later):
            cat, name, dur, tid = kinds[kind]
            events.append({"ph": "X", "cat": cat, "name": name.format(k=k), "pid": 1,
                           "tid": tid + 10 * n,
                           "ts": at + 6 + n, "dur": dur})
        at += 41 + k % 3
    return events


#: Iterations enough for the matcher to confirm its unit online (some 1,240 one-op
#: iterations): from then on each boundary decides the items held one at a time.
_ONLINE = 1300


@needs_native
@pytest.mark.parametrize("later", [["annotation", "op"], ["op"], ["frame", "op"], ["long"],
                                   ["op", "frame", "annotation"], ["step", "op"],
                                   ["step", "step", "op"], ["step", "annotation"]])
@pytest.mark.parametrize("raws, keep", [(True, True), (False, False)])
def test_the_held_ops_at_the_head_owned_in_one_call_and_the_rest_after(later, raws, keep,
                                                                       monkeypatch):
    _both_ways(_mixed_loop(_ONLINE, later), monkeypatch, raws, keep)


@needs_native
def test_a_boundary_owns_the_head_in_one_call_and_the_rest_the_general_way(monkeypatch):
    calls = []

    def counted(items, *args):  # (by ``Splitter._resolve_pending`` itself: the frame above)
        done = engine._native.own_held_ops(items, *args)
        calls.append((sys._getframe(1).f_code.co_name, len(items), done))
        return done

    monkeypatch.setattr(engine, "_open_iteration", None)  # (as ``_both_ways``)
    monkeypatch.setattr(engine, "_own_held_ops", counted)
    _split(_mixed_loop(_ONLINE, ["annotation", "op"]), raws=True)
    assert any(caller == "_resolve_pending" and 0 < done < held
               for caller, held, done in calls)  # the head of several, the rest after


#: Names of a step annotation: ``ProfilerStep#N`` (N of ASCII digits up to 2**63 - 1: the
#: native call owns it, its iteration's first) and names that are not one
#: (``trace_format.profiler_step_number`` says None: the engine's loop owns them).
_STEP_NAMES = ["ProfilerStep#{k}", "ProfilerStep#", "ProfilerStep#00{k}", "ProfilerStep#{k}a",
               "ProfilerStep#" + "9" * 18, "ProfilerStep#9223372036854775807",
               "ProfilerStep#9223372036854775808", "ProfilerStep#" + "1" * 20,
               "ProfilerStep#\u0663", "ProfilerStep#-1", "ProfilerStep# 1", "profilerStep#1",
               "ProfilerStep#{k}\u00e9"]


def _stepped_loop(names: list) -> list:
    """A loop of annotated steps (``ProfilerStep`` annotations, then an op in each, as the
    profiler writes them), the step annotation's name of each iteration taken in turn from
    ``names`` (formatted with the step's number)."""
    events, at = [], 0
    for k, name in enumerate(names):
        events.append({"ph": "X", "cat": "user_annotation", "name": name.format(k=k),
                       "pid": 1, "tid": 1, "ts": at, "dur": 10})
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                       "ts": at + 1, "dur": 5})
        at += 12
    return events


@needs_native
@given(st.lists(st.sampled_from(_STEP_NAMES[1:]), max_size=8), st.integers(8, 40),
       st.booleans(), st.booleans())
@settings(max_examples=40, deadline=None)
def test_step_annotations_owned_in_one_call_are_owned_as_the_loop_owns_them(odd, steps, raws,
                                                                            keep):
    names = [_STEP_NAMES[0]] * steps + odd + [_STEP_NAMES[0]] * 4
    with pytest.MonkeyPatch.context() as monkeypatch:
        _both_ways(_stepped_loop(names), monkeypatch, raws, keep)


@needs_native
def test_annotated_steps_are_owned_in_one_call_each(monkeypatch):
    owned = _both_ways(_stepped_loop([_STEP_NAMES[0]] * 40), monkeypatch, raws=True)
    assert owned >= 2 * 30  # (the step and its op, a boundary: once the steps are the loop)
