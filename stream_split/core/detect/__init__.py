"""The detect stage: where iterations begin, decided from the CPU ops as they stream.

Files, each answering one question:

- ``base``: the contract between the engine and a detector, and the steps detector;
- ``rules``: every threshold, named, with its reason;
- ``skeleton``: the call tree kept (no decisions);
- ``search``: which repeating unit cuts a row of sibling ops (``find_unit``);
- ``verdict``: is the unit found an iteration? can it be believed online?
- ``matcher``: once confirmed, each new op matched against the unit (boundaries stream);
- ``evidence``: what the manifest says of the unit;
- ``section``: has the loop thread's CPU section of a Kineto file ended?
- ``close``: what the detector concludes when the input ends (the close decision);
- ``structure``: the mode machine that drives them (``StructureDetector``).
"""
from stream_split.core.detect.base import (
    DECIDED_FROM_STEPS, DetectorResult, FoundBoundary, RetractLast, StepAnnotationDetector,
    TraceFacts)
from stream_split.core.detect.rules import RULES, Rules
from stream_split.core.detect.search import cycle_kinds
from stream_split.core.detect.structure import StructureDetector

__all__ = ["DECIDED_FROM_STEPS", "DetectorResult", "FoundBoundary", "RetractLast",
           "StepAnnotationDetector", "TraceFacts", "RULES", "Rules", "cycle_kinds",
           "StructureDetector"]
