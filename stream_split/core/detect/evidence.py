"""What the structural detector writes into the evidence (the manifest, ``explain``) of a unit
it found, the same on both decision paths (online and at close). The keys and their values
are part of the output: ``"phase"`` there is where each instance begins (``Unit.opening``),
``"levels"`` the rows of sibling ops searched, top first.
"""
from __future__ import annotations

from stream_split.core.detect.search import Unit
from stream_split.core.detect.verdict import confidence

#: ``evidence["container"]`` of the thread's top-level ops.
TOP_LEVEL = "<thread top level>"


def row_entry(container: list, row: list, unit: Unit | None, names: list) -> dict:
    """One row tried (an entry of ``evidence["levels"]``)."""
    entry = {"container": container or [TOP_LEVEL], "ops": len(row)}
    if unit is not None:
        entry.update(unit=[names[row[unit.first].sym]], period_ops=len(unit.pattern),
                     instances=unit.n, exact=unit.exact, **tolerance(unit, names),
                     time_coverage=round(unit.coverage, 3))
    return entry


def unit_evidence(unit: Unit, anchor: list, why: str, names: list) -> dict:
    """What the evidence says of the chosen unit."""
    return {"unit": [names[s] for s in anchor], "period_ops": len(unit.pattern),
            **tolerance(unit, names), "time_coverage": round(unit.coverage, 3),
            "why": why, "confidence": round(confidence(unit), 3)}


def online_evidence(detector: str, thread: tuple, path: list, row: list, unit: Unit,
                    why: str, names: list) -> dict:
    """The evidence of a unit confirmed online on ``row`` of ``thread`` (inside the
    containers ``path``, outermost first); ``why``: the verdicts that confirmed it."""
    return {"detector": detector, "decided": f"online, after {unit.n} instances",
            "loop_thread": list(thread),
            "levels": [dict(row_entry([names[n.sym] for n in path], row, unit, names),
                            iteration_test=why)],
            **unit_evidence(unit, [row[unit.first].sym], why, names)}


def at_outermost_frame(phase: str, how_many: str) -> str:
    """``evidence["phase"]`` where boundaries were put at the outermost Python frame that
    opens the step (``how_many``: which of them, ``"5 of 5"``)."""
    return f"{phase}, then at the outermost Python frame that opens the step ({how_many})"


def tolerance(unit: Unit, names: list) -> dict:
    """How tolerant the match was."""
    return {"similarity": unit.similarity, "like": unit.like,
            "worst_similarity": unit.worst, "phase": unit.opening,
            "most_different_ops": [[names[s], gap] for s, gap in unit.differing]}
