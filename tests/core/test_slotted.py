"""``records.Slotted`` and ``FrozenSlotted``: the inner classes written out as a slotted
dataclass would make them (``==``, ``repr``, a copy with changes; frozen: assignment refused,
hashed, pickled by the fields), with no method compiled at import."""
from __future__ import annotations

import copy
import pickle
from dataclasses import FrozenInstanceError, dataclass

import pytest

from stream_split.core.detect.base import DetectorResult, FoundBoundary, TraceFacts
from stream_split.core.records import Slotted
from stream_split.core.serving import PhaseFacts


@dataclass(slots=True)
class _AsDataclass:
    start_ts: float
    thread: tuple
    first_op: str
    moves_last: bool = False
    why: str = ""
    opens_after: float | None = None


def test_a_slotted_class_compares_and_shows_as_its_dataclass_would():
    found = FoundBoundary(1.5, (1, 2), "step", why="x")
    twin = _AsDataclass(1.5, (1, 2), "step", why="x")
    assert repr(found) == repr(twin).replace("_AsDataclass", "FoundBoundary")
    assert found == FoundBoundary(1.5, (1, 2), "step", why="x")
    assert found != FoundBoundary(1.5, (1, 2), "step") and found != twin
    assert (found == twin) is False and found.__eq__(twin) is NotImplemented
    with pytest.raises(TypeError):
        hash(found)
    assert PhaseFacts() == PhaseFacts() and PhaseFacts(max_tokens=3) != PhaseFacts()


def test_a_slotted_class_copies_with_changes_and_pickles():
    result = DetectorResult(boundaries=[FoundBoundary(1.0, (1, 1), "op")], last_end=2.0)
    emptied = result._replace(boundaries=[])
    assert (emptied.boundaries, emptied.last_end, emptied.evidence) == ([], 2.0, {})
    assert result.boundaries and DetectorResult().shapes == []
    assert DetectorResult().shapes is not DetectorResult().shapes  # a new list each
    assert pickle.loads(pickle.dumps(result)) == result == copy.deepcopy(result)
    with pytest.raises(TypeError):
        result._replace(nothing=1)
    with pytest.raises(AttributeError):
        result.other = 1  # slots: no other attribute


def test_a_frozen_slotted_class_is_frozen_hashed_and_pickled_by_its_fields():
    facts = TraceFacts(gpu=False)
    with pytest.raises(FrozenInstanceError):
        facts.gpu = True
    with pytest.raises(FrozenInstanceError):
        del facts.frames
    assert hash(facts) == hash((False, None)) and facts == TraceFacts(False, None)
    assert pickle.loads(pickle.dumps(facts)) == facts == copy.copy(facts)
    assert repr(facts) == "TraceFacts(gpu=False, frames=None)"
    assert facts._replace(frames=True) == TraceFacts(False, True)
    assert isinstance(facts, Slotted)
