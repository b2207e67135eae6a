"""What the structural detector concludes when the input ends: the close decision.

A trace never confirmed online (``structure.py``'s ``Mode.LEARNING`` to the end) is decided
here from the whole skeleton of its loop thread (``decide``); so is one whose loop thread's
CPU section ended in a Kineto file with nothing after it that the decision uses
(``Mode.SECTION_END``: the same decision, made earlier). Once confirmed online, the close
only sums up what streamed (``from_steps``, ``from_matcher``).

What a unit found means at close:

- the top level is tried first ("repeats at a thread's top level are iterations"); if a single
  container op dominates it (one ``ProfilerStep``, one ``execute_diffusion`` request, a
  ``serve_forever`` wrapper), or the unit found there is only the minor roots around such a
  container that holds more of it (``verdict.loop_inside``: a warm-up step before the
  engine's loop), its children are tried, descending through wrapper chains
  (``verdict.dominant``). Whether a unit found is an iteration is ``verdict.iteration_test``'s
  answer, the same online; if it is a layer, the container (or the trace) is one iteration
  (``single``);
- ``--level N`` takes the unit N levels below the chosen one (``lower_level``);
- instances at shallower levels, outside every container instance, are instances too
  (failure mode 3: minor roots at the top level);
- a unit found on one section of the loop thread begins with the ops of its other sections
  that open most instances (``align_sections``; online ``RootMatcher._boundary``);
- the phase at the outermost frame of the step: when Python frames open the step's first op,
  the boundary is at the outermost of them (``at_outermost_frames``; online, where the file
  brings frames before the ops they hold, ``RootMatcher._boundary``);
- the last instance ends where ``search.end_of_last`` says, as online.

Nothing here keeps state: the loop thread comes as a ``LoopThread``.
"""
from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass
from heapq import nlargest
from itertools import repeat
from operator import ge, ne

from stream_split.core.detect.base import DECIDED_FROM_STEPS, DetectorResult, FoundBoundary
from stream_split.core.detect.evidence import at_outermost_frame, row_entry, unit_evidence
from stream_split.core.detect.rules import REPEAT, RULES
from stream_split.core.detect.search import Unit, end_of_last, find_unit
from stream_split.core.detect.skeleton import (
    ThreadSkeleton, occurrences, outermost_opener, start_of)
from stream_split.core.detect.verdict import LOOP_INSIDE, dominant, iteration_test
from stream_split.trace_format import PROFILER_STEP_PREFIX

#: ``Unit.opening`` of the unit ``--level N`` found below the chosen one.
OPENS_LEVEL_BELOW = "level below"
#: ``evidence["decided"]`` of a trace decided from its whole skeleton.
DECIDED_AT_CLOSE = "at close"


@dataclass(frozen=True)
class LoopThread:
    """What the close decision reads of the loop thread."""
    #: The skeleton of the section searched (``loop_thread``'s choice).
    skeleton: ThreadSkeleton
    #: Every section's skeleton of the thread, in the order first read (Kineto writes a
    #: thread's sections apart: its ops, then its annotations, say).
    sections: list
    #: The thread's outermost ``nn.Module`` calls as (start, end), or None without frames.
    modules: list | None
    #: The names of the skeleton's symbols.
    names: list


def loop_thread(skeletons, use_annotations: bool) -> ThreadSkeleton | None:
    """The skeleton that drives the loop: of a main thread (pid == tid), with
    ``ProfilerStep`` spans when they count, the busiest at its top level, and of sections
    as busy the one that holds more ops (a reordered thread's first ops, read twice, leave a
    misplaced copy of a few of them, as busy, in a section of their own: ``core/order.py``);
    None when no thread has an op. A section of nothing but empty ``ProfilerStep`` spans
    holds none of the loop's ops (a lone step written after the GPU block, read last in
    end order, after its thread's ops were handed on): no candidate."""
    candidates = _candidates(skeletons)
    if not candidates:
        return None
    ranks = [_loop_rank(t, use_annotations) for t in candidates]
    best = max(ranks)
    tied = [t for t, rank in zip(candidates, ranks) if rank == best]
    return tied[0] if len(tied) == 1 else max(tied, key=_ops_held)


def leading_threads(threads: dict, use_annotations: bool, count: int) -> list:
    """The threads of the ``count`` skeletons that ``loop_thread`` would rank first now (its
    choice among them, whatever the others: a tie goes to more ops held, then to the first
    read), from what each skeleton counts as it grows (``ThreadSkeleton.busy``, summed as it
    came: a thread whose rank is within rounding of the ``count``-th may be left out), the
    first first. ``threads``: ``Skeletons.threads`` (an op kept alone, ``Skeletons.lone``,
    is ranked as the skeleton made of it would be: its tuple begins with that rank). The
    engine asks this of thousands of threads each time it forgets some: each rank a flat
    tuple (``_loop_rank``'s fields, the ops held, the order read, the thread), made in one
    comprehension, and ``nlargest`` on them with no key function (4,096 threads of one op:
    1.1 k instructions a thread, 2.1 k with a key function called per skeleton, callgrind).
    """
    ranks = [t if t.__class__ is tuple else
             (t.main, bool(t.steps) and use_annotations, t.busy, len(t.roots) + t.below,
              t.read, t.key)
             for t in threads.values()
             # (``_candidates``' test, inline; an op kept alone is no ``ProfilerStep``)
             if t.__class__ is tuple or (t.roots and (not t.steps or not _only_empty_steps(t)))]
    if len(ranks) > count:
        ranks = nlargest(count, ranks)
    return [rank[5] for rank in ranks]


def _loop_rank(thread: ThreadSkeleton, use_annotations: bool) -> tuple:
    """How ``loop_thread`` ranks a skeleton: a main thread's first, then one with
    ``ProfilerStep`` spans (when they count), then the busiest at its top level
    (``ThreadSkeleton.busy``: summed as its ops came, the same sum as theirs, and the
    ops forgotten since count too). (``leading_threads`` makes the same tuple inline.)"""
    return (thread.main, bool(thread.steps) and use_annotations, thread.busy)


def _candidates(skeletons) -> list:
    """The skeletons that may drive the loop: those with a top-level op, but not only empty
    ``ProfilerStep`` spans (``_only_empty_steps``, not asked of a skeleton with no step: the
    engine asks this of every thread it knows, up to ``stack.LIVE_THREADS`` of them)."""
    return [t for t in skeletons if t.roots and (not t.steps or not _only_empty_steps(t))]


def _only_empty_steps(thread: ThreadSkeleton) -> bool:
    """Are ``thread``'s top-level ops all ``ProfilerStep`` spans (``ThreadSkeleton.steps``)
    with no op kept beneath them?"""
    return len(thread.roots) == len(thread.steps) and not any(n.kids for n in thread.roots)


def _ops_held(thread: ThreadSkeleton) -> int:
    """The ops kept in ``thread``'s skeleton, its top level and beneath."""
    count, todo = 0, list(thread.roots)
    while todo:
        node = todo.pop()
        count += 1
        todo.extend(node.kids or ())
    return count


def no_loop(detector: str) -> DetectorResult:
    """No CPU ops at all: nothing drives a loop."""
    return DetectorResult(evidence={"detector": detector, "decided": DECIDED_AT_CLOSE,
                                    "why": "no CPU ops: nothing drives a loop",
                                    "instances": 0, "confidence": 1.0})


def from_steps(detector: str, thread, last_end: float, count: int, why: str) -> DetectorResult:
    """Regular ``ProfilerStep#N`` spans of ``thread`` (``Mode.STEPS``, ``why``: from
    ``verdict.regular_steps``): each was a boundary as it came; the close only reports
    them."""
    return DetectorResult(
        last_end=last_end,
        evidence={"detector": detector, "decided": DECIDED_FROM_STEPS,
                  "loop_thread": list(thread),
                  "unit": [PROFILER_STEP_PREFIX + "N"], "level": "top",
                  "instances": count, "confidence": RULES.verdict.steps_confidence,
                  "why": why})


def from_matcher(matcher, online_evidence: dict) -> DetectorResult:
    """The unit was confirmed online (``Mode.MATCHING``): the matcher's last instance ends,
    and the evidence counts what it matched."""
    shapes, last_end, revisions = matcher.finish()
    # One float object per distinct value (rounded to 0.001: a thousand at most), not one per
    # instance (``CodedColumn``): 8 bytes an instance of the evidence (1 M iterations matched
    # online).
    sims = list(matcher.similarity)
    # (counted in C: ``map`` of an operator, not a generator's step an instance)
    evidence = dict(online_evidence, instances=len(shapes),
                    phase=online_evidence["phase"] + matcher.frames_note(),
                    variants=sum(map(ne, shapes, repeat(0))), similarity=sims,
                    like=sum(map(ge, sims, repeat(RULES.like))),
                    worst_similarity=min(sims, default=0.0))
    return DetectorResult(boundaries=revisions, last_end=last_end, shapes=shapes,
                          evidence=evidence)


def decide(loop: LoopThread, level: int, detector: str) -> DetectorResult:
    """The close decision on the loop thread's whole skeleton (see the module docstring)."""
    names = loop.names
    thread = loop.skeleton
    evidence = {"detector": detector, "decided": DECIDED_AT_CLOSE,
                "loop_thread": list(thread.key), "levels": []}
    row, path = thread.roots, []
    chosen = None
    while row:
        unit = find_unit(row, names=names)
        entry = row_entry([names[p.sym] for p in path], row, unit, names)
        evidence["levels"].append(entry)
        if unit is not None:
            verdict, why = iteration_test(thread.roots, row, unit, path, loop.modules)
            entry["iteration_test"] = why
            if verdict:
                chosen = (row, unit, why)
            elif why == LOOP_INSIDE:  # failure mode 3: the loop is in the container
                unit = None
            elif path:
                evidence["why"] = ("the unit inside the container is a layer ("
                                   + why + "): the container is one iteration")
            else:
                evidence["why"] = ("the repeating unit is a layer (" + why
                                   + "): the trace is one unit of work")
            if unit is not None:
                break
        container = dominant(row)
        if container is None or not container.kids:
            break
        path.append(container)
        row = container.kids
    if thread.forgotten:  # ops of names of their own (``Skeletons.forget_singles``)
        evidence["levels"][0]["forgotten_ops"] = thread.forgotten
    if chosen is None:
        return single(loop, path, evidence)
    row, unit, why = chosen
    if level:
        row, unit = lower_level(row, unit, level, names, evidence)
    return _instances(loop, row, unit, path, why, evidence)


def lower_level(row: list, unit: Unit, level: int, names: list, evidence: dict):
    """--level N: the unit N levels below (repeats inside one instance), if any. Returns
    the row and the unit."""
    for _ in range(level):
        p = unit.positions[0]
        inner_row = row[p:p + len(unit.pattern)]
        if len(inner_row) == 1 and inner_row[0].kids:
            inner_row = inner_row[0].kids
        flat = inner_row
        inner = find_unit(flat, names=names)
        if inner is None:
            evidence["level_note"] = (f"no repeating unit inside an iteration "
                                      f"({len(flat)} ops at its top)")
            break
        # Apply the inner unit to the whole row: every instance's sub-units, cut where its
        # first op occurs. That op must open each sub-unit and occur nowhere else in them:
        # else the cut is not the unit found (``aten::view`` x16 in an iteration, not the
        # unit's 4 instances).
        anchor = flat[inner.first].sym
        if len(occurrences(flat, anchor)) != inner.n:
            evidence["level_note"] = (
                f"no unit below the chosen one that its first op cuts: inside an iteration "
                f"({len(flat)} ops at its top) the closest is {inner.n} instances of about "
                f"{len(inner.pattern)} ops starting at {names[anchor]}, which occurs "
                f"{len(occurrences(flat, anchor))} times there")
            break
        positions = occurrences(row, anchor)
        if len(positions) < REPEAT:
            kids = [k for n in row for k in (n.kids or [])]
            positions = occurrences(kids, anchor)
            row = kids
        if len(positions) < REPEAT:
            break
        pattern = tuple(n.sym for n in row[positions[0]:positions[1]])
        unit = Unit(positions=positions, pattern=pattern, similarity=[1.0] * len(positions),
                    like=len(positions), fragments=0, coverage=inner.coverage,
                    anchor=anchor, shapes=[0] * len(positions),
                    exact=len(positions), opening=OPENS_LEVEL_BELOW)
        evidence["level"] = level
    return row, unit


def _instance_starts(thread: ThreadSkeleton, row: list, unit: Unit, path: list) -> list:
    """Where each instance of ``unit`` starts, in time order: (start, symbol, shape, its
    row, its position there); on ``row``, and at shallower levels (failure mode 3),
    outside every container instance."""
    anchor = row[unit.first].sym
    starts = []
    for i, p in enumerate(unit.positions):
        starts.append((row[p].start, row[p].sym, unit.shapes[i], row, p))
    for outer in [thread.roots] + [c.kids for c in path[:-1]]:
        if outer is row:
            continue
        for p in occurrences(outer, anchor):
            node = outer[p]
            if any(c is node for c in path):
                continue
            segment = tuple(n.sym for n in outer[p:p + len(unit.pattern)])
            segment = 0 if segment == unit.pattern else segment
            starts.append((node.start, node.sym, segment, outer, p))
    starts.sort(key=lambda s: s[0])
    return starts


def _instances(loop: LoopThread, row: list, unit: Unit, path: list, why: str,
               evidence: dict) -> DetectorResult:
    """The boundaries of the unit chosen, where the last instance ends, and the evidence."""
    names = loop.names
    thread = loop.skeleton
    starts = _instance_starts(thread, row, unit, path)
    boundaries, shapes = [], []
    for start, sym, shape, _, _ in starts:
        if boundaries and start <= boundaries[-1].start_ts:
            continue
        boundaries.append(FoundBoundary(start, thread.key, names[sym]))
        shapes.append(shape)
    if not path:
        boundaries = align_sections(loop, row, unit, boundaries)
    _, _, _, last_row, last_p = starts[-1]
    width = len(unit.pattern)
    pos = unit.positions
    last_end = end_of_last(last_row[last_p:],
                           [b - a for a, b in zip(pos, pos[1:])] or [width],
                           {n.sym for n in row[pos[0]:pos[-1]]},
                           [row[p].start for p in pos])
    boundaries, last_end, moved = at_outermost_frames(loop.sections, boundaries, last_end)
    evidence.update(unit_evidence(unit, [row[unit.first].sym], why, names),
                    instances=len(boundaries), exact=unit.exact,
                    variants=sum(shape != 0 for shape in shapes))
    if moved:
        evidence["phase"] = at_outermost_frame(evidence["phase"], f"{moved} of {len(boundaries)}")
    return DetectorResult(boundaries=boundaries, last_end=last_end, shapes=shapes,
                          evidence=evidence)


def at_outermost_frames(sections: list, boundaries: list,
                        last_end: float) -> tuple[list, float, int]:
    """The phase at the outermost frame of the step: a boundary at a top-level op (of any
    of the loop thread's ``sections``) that Python frames open (``Node.opener``: each
    begins after the previous top-level op ended and holds this one: ``training_step``
    around the step's first ``aten::`` op, one to three wrappers deep) moves back to the
    start of the outermost of them that ends before the next boundary (the program's own
    frame holds every step), so the user's own frames before the first op are the step's.
    The last iteration ends no earlier than its opening frame. Returns the boundaries, the
    last end and how many moved."""
    opened = {n.start: n for t in sections for n in t.roots if n.opener is not None}
    if not opened:
        return boundaries, last_end, 0
    moved = []
    floor = float("-inf")
    last_frame = None
    for i, b in enumerate(boundaries):
        ceiling = boundaries[i + 1].start_ts if i + 1 < len(boundaries) else float("inf")
        node = opened.get(b.start_ts)
        frame = None if node is None else outermost_opener(node, ceiling)
        if frame is not None and floor < frame[0] < b.start_ts:
            b = FoundBoundary(frame[0], b.thread, frame[2])
        moved.append(b)
        floor = b.start_ts
        last_frame = frame
    if last_frame is not None and last_end is not None:
        last_end = max(last_end, last_frame[1])
    return moved, last_end, sum(a is not b for a, b in zip(moved, boundaries))


def opening_elsewhere(thread: ThreadSkeleton, sections: list, row: list, unit: Unit):
    """The ops of the loop thread's other ``sections`` (in time order), and the kinds of
    them that open most instances of ``unit`` found on ``row`` of ``thread`` (found between
    the end of the previous instance and the instance's first op: ``aten::randn`` before a
    ``data_fwd`` annotation, a ``zero_grad`` annotation before the step's first cpu_op).
    Kineto writes a thread's sections apart, so no single section sees the whole step.
    Online, the matcher begins each instance the same way (``RootMatcher._boundary``)."""
    pos = unit.positions
    others = [n for t in sections if t is not thread for n in t.roots]
    if not others or len(pos) < RULES.verdict.opening_instances:
        return [], set()
    others.sort(key=start_of)
    starts = [n.start for n in others]
    gaps = []
    for i, p in enumerate(pos):
        before = row[pos[i - 1]:p] if i else row[:pos[0]]
        lo = max((n.end for n in before), default=float("-inf"))
        gaps.append(others[bisect_left(starts, lo):bisect_left(starts, row[p].start)])
    seen_in = Counter(sym for gap in gaps[1:] for sym in {n.sym for n in gap})
    opening = {sym for sym, c in seen_in.items()
               if c >= RULES.verdict.opening_share * (len(gaps) - 1)}
    return others, opening


def section_openers(thread: ThreadSkeleton, sections: list, row: list, unit: Unit,
                    names: list) -> list:
    """Online: (start, name) of every op of the thread's other ``sections``, read so far, of
    a kind that opens instances (``opening_elsewhere``): the matcher begins each new
    instance at the one before its first op (``RootMatcher._boundary``)."""
    others, opening = opening_elsewhere(thread, sections, row, unit)
    return [(n.start, names[n.sym]) for n in others if n.sym in opening]


def align_sections(loop: LoopThread, row: list, unit: Unit, boundaries: list) -> list:
    """A unit found on one section of the loop thread (its annotations, say) begins with
    the ops of the thread's other sections that open most instances
    (``opening_elsewhere``)."""
    pos = unit.positions
    if len(boundaries) != len(pos):
        return boundaries
    others, opening = opening_elsewhere(loop.skeleton, loop.sections, row, unit)
    if not opening:
        return boundaries
    starts = [n.start for n in others]
    aligned = []
    for i, b in enumerate(boundaries):
        before = row[pos[i - 1]:pos[i]] if i else row[:pos[0]]
        lo = max((n.end for n in before), default=float("-inf"))
        gap = others[bisect_left(starts, lo):bisect_left(starts, b.start_ts)]
        first = next((n for n in gap if n.sym in opening), None)
        aligned.append(b if first is None else
                       FoundBoundary(first.start, b.thread, loop.names[first.sym]))
    return aligned


def single(loop: LoopThread, path: list, evidence: dict) -> DetectorResult:
    """No repeating unit (or a layer's): the loop thread's work, or the outermost container
    of ``path``, is one iteration."""
    roots = loop.skeleton.roots
    names = loop.names
    span_owner = path[0] if path else None
    start = span_owner.start if span_owner else roots[0].start
    end = span_owner.end if span_owner else max(n.end for n in roots)
    name = names[span_owner.sym] if span_owner else names[roots[0].sym]
    evidence.setdefault("why", "no op sequence repeats: the trace is one unit of work")
    evidence.update(unit=[name], instances=1, confidence=RULES.verdict.single_confidence)
    return DetectorResult(boundaries=[FoundBoundary(start, loop.skeleton.key, name)],
                          last_end=end, evidence=evidence)
