"""What a split writes of the iterations it finds: ``--iterations``, ``--steps``, ``--phase``
and ``--steady N`` (``IterationChoice``), and the text of a selection ('0,3,10-19', 'steady',
'15-17') read as a predicate (``parse_selection``, ``parse_steps``).

Only ``split`` (the CLI's, the library's, Beam's) reads a selection. One that chose nothing is
an error from ``options.require_selected``, with the other checks of options that could
quietly do nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

from stream_split.core.records import KIND_IDLE
from stream_split.core.serving import IDLE as PHASE_IDLE
from stream_split.errors import OptionWarning
from stream_split.options import require_selected
from stream_split.stats import analyze_records, judged_time


#: ``--iterations steady``: the steady state (``stream_split.stats``), known at the end.
STEADY = "steady"


@dataclass(frozen=True)
class Selection:
    """A predicate on numbers ('0,3,5-9'); picklable, so it can go to a worker process."""
    chosen: frozenset
    ranges: tuple

    def __call__(self, n: int) -> bool:
        return n in self.chosen or any(lo <= n <= hi for lo, hi in self.ranges)


def parse_selection(text: str | None, *, steady: bool = True):
    """'0,3,5-9' -> ``Selection`` ('5-': 5 and after; '-5' is no range but an error);
    'steady' -> ``STEADY`` (when ``steady``: iterations, not step numbers); None -> all. ValueError if malformed, a
    negative number included ('-5', '3--1')."""
    if not text:
        return None
    if steady and text.strip() == STEADY:
        return STEADY
    chosen, ranges = set(), []
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            if "-" in part:
                lo, hi = part.split("-", 1)
                ranges.append((_count(lo), _count(hi) if hi else float("inf")))
            else:
                chosen.add(_count(part))
    except ValueError:
        like = "'0,3,10-19' or 'steady'" if steady else "'15-17'"
        raise ValueError(f"not a list of {'iterations' if steady else 'step numbers'} like "
                         f"{like}: {text!r}") from None
    return Selection(frozenset(chosen), tuple(ranges))


def _count(text: str) -> int:
    """A number of a selection: ASCII digits only (``-5`` is no open range, ``+5`` no
    number); ValueError otherwise."""
    text = text.strip()
    if not (text.isascii() and text.isdigit()):
        raise ValueError(text)
    return int(text)


def parse_steps(text: str | None):
    """``--steps``: '15-17' -> ``Selection`` of ``ProfilerStep`` numbers; None -> all."""
    return parse_selection(text, steady=False)


@dataclass(frozen=True)
class IterationChoice:
    """What ``--iterations``, ``--steps``, ``--phase`` and ``--steady N`` asked for (several:
    the iterations all of them chose). Picklable. ``early`` selects by index while events are
    spooled; ``chosen`` decides at the end, when the steady state, every iteration's step
    number and phase are known."""
    iterations: object = None  # Selection, STEADY or None
    iterations_text: str | None = None
    steps: Selection | None = None
    steps_text: str | None = None
    #: A serving phase (``core.serving.PHASES``): only the iterations of that phase.
    phase: str | None = None
    #: N: the N steady iterations nearest their median (``representative``), as TraceLens's
    #: ``--num-steps`` takes N steps to analyse.
    steady: int | None = None

    @property
    def early(self):
        """A predicate on iteration indices usable before the end, or None."""
        return self.iterations if isinstance(self.iterations, Selection) else None

    @property
    def texts(self) -> dict:
        """``{"iterations": text, "steps": text}`` as given (None where not), with ``phase``
        and ``steady`` when given: the manifest's ``selection``."""
        return {"iterations": self.iterations_text, "steps": self.steps_text,
                **({} if self.phase is None else {"phase": self.phase}),
                **({} if self.steady is None else {"steady": self.steady})}

    def chosen(self, records: list) -> list[int] | None:
        """Indices of the chosen iterations of ``records`` (None: all); ``OptionHadNoEffect``
        when a selection matched none."""
        if (self.iterations, self.steps, self.phase, self.steady) == (None,) * 4:
            return None
        indices = [r.index for r in records]
        if self.iterations == STEADY:
            steady = analyze_records(records).steady_state
            indices = list(range(steady["first"], steady["last"] + 1)) if steady else []
        elif self.iterations is not None:
            indices = [i for i in indices if self.iterations(i)]
        require_selected("iterations", self.iterations_text, len(indices), len(records))
        if self.steps is not None:
            step_of = {r.index: r.step for r in records}
            indices = [i for i in indices
                       if step_of.get(i) is not None and self.steps(step_of[i])]
            steps = [r.step for r in records if r.step is not None]
            require_selected("steps", self.steps_text, len(indices), len(records),
                             f"the trace has steps {min(steps)}-{max(steps)}" if steps
                             else "the trace has no ProfilerStep numbers")
        if self.phase is not None:
            indices = self._of_phase(records, indices)
        if self.steady is not None:
            indices = representative(records, indices, self.steady)
            require_selected("steady", self.steady, len(indices), len(records),
                             "none of them is in the steady state")
        return indices

    def _of_phase(self, records: list, indices: list[int]) -> list[int]:
        phase_of = {r.index: getattr(r, "phase", None) for r in records}
        kept = [i for i in indices if phase_of.get(i) == self.phase]
        phases = sorted({p for p in phase_of.values() if p})
        require_selected("phase", self.phase, len(kept), len(records),
                         f"the trace's phases: {', '.join(phases)}" if phases
                         else "the trace has no serving phases")
        return kept

    def dropped(self, records: list) -> OptionWarning | None:
        """A warning naming the numbers ``--iterations`` or ``--steps`` gave that no iteration
        has (``--iterations 0,3,20`` on 10 iterations: 20), or None; ranges open at the top
        (``10-``) name no number."""
        for option, text, selection, have in (
                ("iterations", self.iterations_text, self.iterations,
                 {r.index for r in records}),
                ("steps", self.steps_text, self.steps,
                 {r.step for r in records if r.step is not None})):
            if not isinstance(selection, Selection) or not have:
                continue
            named = set(selection.chosen).union(*(
                range(lo, int(hi) + 1) for lo, hi in selection.ranges
                if hi != float("inf") and hi - lo < MAX_NAMED_RANGE))
            missing = sorted(named - have)
            if missing:
                return _dropped_warning(option, text, missing, have)
        return None


#: A closed range wider than this (``0-999999999``) is read as "all there are": its missing
#: numbers are not listed.
MAX_NAMED_RANGE = 1_000_000


def _dropped_warning(option: str, text: str, missing: list[int], have: set) -> OptionWarning:
    noun = "iteration" if option == "iterations" else "step"
    return OptionWarning.worded(lambda spell: (
        f"{spell(option, text)}: no {noun} {ranges_text(missing)} (the trace has "
        f"{noun}s {min(have)}-{max(have)}); {'it is' if len(missing) == 1 else 'they are'} "
        f"left out, the others written"))


def ranges_text(numbers: list[int]) -> str:
    """``20``, ``20-29``, ``5, 20-29``: sorted numbers as ranges."""
    parts, start = [], None
    for i, n in enumerate(numbers):
        if start is None:
            start = n
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            parts.append(str(n) if n == start else f"{start}-{n}")
            start = None
    return ", ".join(parts)


def representative(records: list, indices: list[int], count: int) -> list[int]:
    """``--steady N``: of ``indices``, the ``count`` iterations of the steady state (its
    range, neither outliers nor idle) whose wall span is nearest the median of their group
    (their serving phase's, else the loop's), in index order; all of them when there are no
    more than ``count``."""
    stats = analyze_records(records)
    steady = stats.steady_state
    if not steady:
        return []
    keep = set(indices)
    candidates = [(r, stats.groups.get(getattr(r, "phase", None)) or stats.overall)
                  for k, r in enumerate(records)
                  if r.index in keep and steady["first"] <= k <= steady["last"]
                  and r.kind != KIND_IDLE and getattr(r, "phase", None) != PHASE_IDLE
                  and k not in stats.reasons and judged_time(r) is not None]
    nearest = sorted(candidates, key=lambda c: (abs(judged_time(c[0]) - (c[1].median_us or 0)),
                                                c[0].index))
    return sorted(r.index for r, _ in nearest[:count])
