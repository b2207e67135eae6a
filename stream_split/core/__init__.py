"""The core: a streaming state machine that does no I/O (events in, owners and records out).

Stages, each in its own module: ``stack`` (per-thread open ops), the ``detect`` package (where
iterations begin), ``owners`` (who owns which event), ``serving`` (the serving phase of each
iteration), ``engine`` (drives them).
"""
from stream_split.core.engine import Splitter, SplitOptions, TraceEventError
from stream_split.core.records import (
    Boundary, IterationRecord, Revision, OUTSIDE, METADATA, KIND_IDLE, KIND_ITERATION)

__all__ = ["Splitter", "SplitOptions", "TraceEventError", "Boundary", "IterationRecord", "Revision",
           "OUTSIDE", "METADATA", "KIND_IDLE", "KIND_ITERATION"]
