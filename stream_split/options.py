"""Options that could quietly do nothing: the checks that say so, in one place.

Every adapter (CLI, library, Beam) asks here whether a run did what its options asked:
``--detector steps`` on a trace without ``ProfilerStep#N``, a ``--level`` that does not exist,
a selection of iterations (``--iterations``, and any other selection such as step numbers)
that matches nothing. No I/O: the callers print or raise. What a selection is, and which
iterations it chooses, is ``selection``'s: only ``split`` loads it, every run loads this.
"""
from __future__ import annotations

from stream_split.core.detect import DECIDED_FROM_STEPS
from stream_split.core.records import KIND_IDLE
from stream_split.errors import OptionHadNoEffect, OptionWarning


def require_selected(option: str, text: str | None, selected: int, available: int,
                     found: str | None = None) -> None:
    """A selection (the option named ``option`` given as ``text``) that chose none of
    ``available`` items is an error: the user asked for pieces and would get none. ``found``
    says what there is."""
    if selected == 0:
        raise OptionHadNoEffect.worded(lambda spell: (
            f"{spell(option, text)} matches none of the {available} "
            f"iteration{'' if available == 1 else 's'} found"
            + (f" ({found})" if found else "")))


def require_steps_found(detector: str, iterations: list) -> None:
    """``--detector steps`` found no ``ProfilerStep#N``: every event would be outside."""
    if detector == "steps" and not any(r.kind != KIND_IDLE for r in iterations):
        raise OptionHadNoEffect.worded(lambda spell: (
            f"{spell('detector', 'steps')}: the trace has no ProfilerStep#N annotations; "
            f"use {spell('detector', 'auto')} to find the iterations from the call structure"))


def level_used(requested: int | None, evidence: dict) -> dict:
    """``{"requested": N or None, "used": M}``: the level of the split that was written."""
    used = evidence.get("level")
    return {"requested": requested, "used": used if isinstance(used, int) else 0}


def level_warning(requested: int | None, evidence: dict) -> OptionWarning | None:
    """A warning when ``--level N`` could not be honoured (no repeating unit below)."""
    used = level_used(requested, evidence)["used"]
    if requested and used != requested:
        why = evidence.get("level_note") or (
            "the iterations were taken from the step annotations as they came; no level "
            "below them was searched" if evidence.get("decided") == DECIDED_FROM_STEPS
            else "no level below the iteration was searched")
        return OptionWarning.worded(lambda spell: (
            f"{spell('level', requested)} is not available ({why}); "
            f"the split is at level {used}"))
    return None


def check_honoured(options, splitter) -> OptionWarning | None:
    """After a run to the end of its input: ``OptionHadNoEffect`` when ``options`` (the
    run's ``SplitOptions``) asked for what the trace cannot give (``--detector steps``
    without steps), or the warning of a ``--level`` that is not available, or None."""
    require_steps_found(options.detector, splitter.iterations)
    return level_warning(options.level, splitter.evidence)
