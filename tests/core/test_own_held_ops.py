"""Held ops owned at a boundary in one call (``_native.own_held_ops``, where built: the common
case of ``engine.Splitter._own_each``) are owned as that method's loop owns them, its
fallback: the same owners, in the same order, and the same records and breakdowns."""
import json

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
