"""Options that could quietly do nothing: the checks that say so, in one place.

Every adapter (CLI, library, Beam) asks here whether a run did what its options asked:
``--detector steps`` on a trace without ``ProfilerStep#N``, a ``--level`` that does not exist,
a selection of iterations (``--iterations``, and any other selection such as step numbers)
that matches nothing. No I/O: the callers print or raise.
"""
from __future__ import annotations

from stream_split.core.records import KIND_IDLE


class OptionHadNoEffect(ValueError):
    """An option the run could not honour; the message is one line, for the user."""


def parse_selection(text: str | None):
    """'0,3,5-9' -> predicate on iteration indices; 'steady' -> the string 'steady' (the
    steady state, known at the end); None -> all. ValueError if malformed."""
    if not text:
        return None
    if text.strip() == "steady":
        return "steady"
    chosen, ranges = set(), []
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            if "-" in part:
                lo, hi = part.split("-", 1)
                ranges.append((int(lo) if lo else 0, int(hi) if hi else float("inf")))
            else:
                chosen.add(int(part))
    except ValueError:
        raise ValueError(f"not a list of iterations like '0,3,10-19' or 'steady': {text!r}"
                         ) from None
    return lambda i: i in chosen or any(lo <= i <= hi for lo, hi in ranges)


def require_selected(option: str, text: str, selected: int, available: int) -> None:
    """A selection (``option`` given as ``text``) that chose none of ``available`` items is
    an error: the user asked for pieces and would get none."""
    if selected == 0:
        raise OptionHadNoEffect(
            f"{option} {text} matches none of the {available} "
            f"iteration{'' if available == 1 else 's'} found")


def require_steps_found(detector: str, iterations: list) -> None:
    """``--detector steps`` found no ``ProfilerStep#N``: every event would be outside."""
    if detector == "steps" and not any(r.kind != KIND_IDLE for r in iterations):
        raise OptionHadNoEffect(
            "--detector steps: the trace has no ProfilerStep#N annotations; "
            "use --detector auto to find the iterations from the call structure")


def level_used(requested: int | None, evidence: dict) -> dict:
    """``{"requested": N or None, "used": M}``: the level of the split that was written."""
    used = evidence.get("level")
    return {"requested": requested, "used": used if isinstance(used, int) else 0}


def level_warning(requested: int | None, evidence: dict) -> str | None:
    """A warning when ``--level N`` could not be honoured (no repeating unit below)."""
    used = level_used(requested, evidence)["used"]
    if requested and used != requested:
        why = evidence.get("level_note") or (
            "the iterations were taken from the step annotations as they came; no level "
            "below them was searched" if evidence.get("decided") == "online"
            else "no level below the iteration was searched")
        return (f"--level {requested} is not available ({why}); "
                f"the split is at level {used}")
    return None
