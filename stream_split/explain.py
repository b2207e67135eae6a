"""`stream-split explain`: a person's account of how the iteration was found.

Reads only the evidence the detector left in ``Splitter.evidence`` (the same evidence the
manifest carries under ``detection``); it never re-derives anything.
"""
from __future__ import annotations

from stream_split.core.detect import DECIDED_FROM_STEPS
from stream_split.core.detect.close import OPENS_LEVEL_BELOW
from stream_split.options import level_used
from stream_split.stats import analyze_records, quantile


def shown(value) -> str:
    """``value`` as text safe for a terminal: control characters (a trace could carry escape
    sequences in its names) and lone surrogates are written as Python escapes."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def plural(n: int, noun: str) -> str:
    """'1 iteration', '3 iterations'."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def render(splitter) -> str:
    """The account, one line a fact; every name from the trace goes through ``shown``."""
    return "\n".join(shown(line) for line in _lines(splitter))


def _tolerance(ev: dict) -> list[str]:
    """How tolerant the match was: each instance's similarity to the unit, the worst one, the
    ops that differed most, and where the loop was taken to begin."""
    sims = ev.get("similarity")
    if not sims:
        return []
    like = ev.get("like", sum(1 for x in sims if x >= 0.55))
    shown_sims = " ".join(f"{x:.2f}" for x in sims[:24]) + (" ..." if len(sims) > 24 else "")
    lines = [f"tolerance: {like} of {len(sims)} instances are like the unit "
             f"(weighted similarity by time and GPU work, 1.00 = the same work; "
             f"worst {ev.get('worst_similarity', min(sims)):.2f})",
             f"  similarity per instance: {shown_sims}"]
    differing = ev.get("most_different_ops") or []
    if differing:
        lines.append("  ops that differed most in the worst instance: "
                     + ", ".join(f"{name} ({gap:.0%} of the work)" for name, gap in differing))
    if ev.get("phase", "").startswith(OPENS_LEVEL_BELOW):
        lines.append("  the iterations are the unit one level below the loop's (--level)")
    elif ev.get("phase"):
        lines.append(f"  the iteration begins {ev['phase']}")
    return lines


def detector_line(asked: str, ev: dict) -> str:
    """``detector: auto (chose the structure; decided online)``: the detector asked for and,
    under ``auto``, which evidence it went by."""
    decided = ev.get("decided", "online")
    if asked != "auto":
        return f"detector: {asked} (decided {decided})"
    chose = ("the ProfilerStep#N annotations" if decided == DECIDED_FROM_STEPS
             else "the call structure")
    return f"detector: auto (chose {chose}; decided {decided})"


def _lines(splitter) -> list[str]:
    ev = splitter.evidence
    iterations = splitter.iterations
    kinds = {}
    for it in iterations:
        kinds[it.kind] = kinds.get(it.kind, 0) + 1
    lines = [detector_line(splitter.options.detector, ev)]
    if ev.get("loop_thread"):
        pid, tid = ev["loop_thread"]
        lines.append(f"loop thread: pid {pid} tid {tid}")
    for level in ev.get("levels", []):
        where = " > ".join(level["container"])
        if "unit" in level:
            lines.append(
                f"  level {where} ({level['ops']} ops): unit starting with "
                f"{' + '.join(level['unit'])}, period {level['period_ops']} ops, "
                f"{level['instances']} instances ({level['exact']} exact), covering "
                f"{100 * level['time_coverage']:.0f}% of the level's time"
                + (f"; {level['iteration_test']}" if level.get("iteration_test") else ""))
        else:
            lines.append(f"  level {where} ({level['ops']} ops): no repeating unit")
    unit = ev.get("unit") or []
    unit = " + ".join([unit] if isinstance(unit, str) else unit) or "-"
    lines.append(f"chosen unit: {unit}")
    level = level_used(splitter.options.level, ev)
    if level["requested"]:
        lines.append(f"level: {level['requested']} asked, {level['used']} used"
                     + (f" ({ev['level_note']})" if ev.get("level_note") else ""))
    lines.extend(_tolerance(ev))
    if ev.get("why"):
        lines.append(f"why: {ev['why']}")
    if ev.get("steps_not_trusted"):
        lines.append(f"ProfilerStep#N spans found but not trusted, the structure decided: "
                     f"{ev['steps_not_trusted']}")
    if ev.get("waited"):
        lines.append(f"decided at close, not at the end of the loop thread's CPU section: "
                     f"{ev['waited']}")
    if "confidence" in ev:
        lines.append(f"confidence: {ev['confidence']} of 1. How sure the detector is that "
                     f"the unit is one iteration (coverage x mean similarity x "
                     f"min(1, instances / 3)); below 0.5, look at the table (stream-split "
                     f"summary) and try --detector steps if the trace has ProfilerStep#N, "
                     f"or --level 1.")
    summary = ", ".join(plural(n, "idle cycle" if k == "idle" else k)
                        for k, n in kinds.items()) or "none"
    lines.append(f"found: {summary}")
    durations = sorted(it.duration_us for it in iterations if it.kind == "iteration")
    if durations:
        stats = analyze_records(iterations)
        outliers = len(stats.reasons)
        lines.append(f"iteration time: median {quantile(durations, 0.5) / 1000:.3f} ms, "
                     f"min {durations[0] / 1000:.3f} ms, max {durations[-1] / 1000:.3f} ms; "
                     + (plural(outliers, "outlier") if outliers else "no outliers")
                     + " (stream-split summary shows which)")
    lines.append(f"outside: {splitter.outside_events} events "
                 f"({splitter.outside_kernels} kernels with no launch in the trace or "
                 f"launched outside every iteration)")
    return lines
