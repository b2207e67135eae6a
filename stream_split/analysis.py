"""Why an iteration is slow: one iteration against another, from the pieces of a split folder.

``profile_piece`` reads one piece (an iteration's own events) into totals per name: CPU ops
and annotations (count, self time, total time; self time is the op's time less its children's
on the same thread, so self times add up without counting nested work twice) and GPU work
(count, total time). ``compare`` puts two iterations side by side (their manifest entries and
profiles): the wall span and CPU window, the breakdown's categories, the ops and kernels whose
time changed most, those present in only one; and ``reason``, a short plain phrase
(``+5.3 ms: eval x1, aten::linear +9, aten::addmm +9``).

``baseline_index`` picks what an iteration is compared with by default: the median
iteration of the steady state (of its own phase, for a server), judged on the wall span
(``stats.judged_time``). ``explain_outliers`` writes the phrase into each outlier's
``outlier_reason`` after a split, reading two pieces at a time (the baseline's profile and one
outlier's). ``why`` and ``diff`` are the commands' data.
"""
from __future__ import annotations

import gzip
import json
import os
import re
from itertools import islice

from stream_split.core.records import KIND_IDLE
from stream_split.core.serving import IDLE as PHASE_IDLE
from stream_split.manifest_entries import outlier_positions
from stream_split.stats import judged_time, quantile
from stream_split.trace_format import GPU_WORK_CATS, STRUCTURE_CATS

#: Breakdown figures compared (µs), with the host's time in ops.
CATEGORIES = ("compute_us", "comm_us", "memcpy_us", "memset_us", "idle_us")
#: Rows of each list in a comparison.
TOP = 10
#: Items named in a reason phrase.
REASON_ITEMS = 3
_DIGITS = re.compile(r"#\d+$")


def folded(name: str) -> str:
    """An op name with a trailing ``#N`` folded (``ProfilerStep#7`` -> ``ProfilerStep#N``):
    the same op in two iterations."""
    return _DIGITS.sub("#N", name)


def read_piece(path: str) -> dict:
    """A piece (gzip or plain JSON) as a dict."""
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    opener = gzip.open if gz else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def profile_piece(path: str) -> dict:
    """``{"ops": {name: [count, self_us, total_us, {parent name: count}]}, "kernels": {name:
    [count, total_us]}}`` of the piece at ``path`` (an op's parent: the op that holds it on
    its thread, "" for none)."""
    events = read_piece(path).get("traceEvents") or []
    ops: dict = {}
    kernels: dict = {}
    threads: dict = {}
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        cat, name = event.get("cat"), str(event.get("name") or "")
        dur = float(event.get("dur") or 0.0)
        if cat in GPU_WORK_CATS:
            seen = kernels.setdefault(name, [0, 0.0])
            seen[0] += 1
            seen[1] += dur
        elif cat in STRUCTURE_CATS:  # CPU-side: names say what the host did
            threads.setdefault((event.get("pid"), event.get("tid")), []).append(
                (float(event["ts"]), -dur, folded(name)))
    for spans in threads.values():
        _add_thread(ops, spans)
    return {"ops": ops, "kernels": kernels}


def _add_thread(ops: dict, spans: list) -> None:
    """Count one thread's ops into ``ops``: self time by the stack of open ops."""
    spans.sort()
    stack: list = []  # [end, name, child time, duration, parent name]
    for start, neg_dur, name in spans:
        dur = -neg_dur
        while stack and stack[-1][0] <= start:
            _close(ops, stack.pop())
        if stack:
            stack[-1][2] += dur
        stack.append([start + dur, name, 0.0, dur, stack[-1][1] if stack else ""])
    while stack:
        _close(ops, stack.pop())


def _close(ops: dict, frame: list) -> None:
    _, name, children, dur, parent = frame
    seen = ops.setdefault(name, [0, 0.0, 0.0, {}])
    seen[0] += 1
    seen[1] += max(0.0, dur - children)
    seen[2] += dur
    seen[3][parent] = seen[3].get(parent, 0) + 1


def baseline_index(manifest: dict, index: int | None = None) -> int | None:
    """The steady state's median iteration (judged on the wall span; of the phase of
    iteration ``index`` for a server), or None when there is none."""
    iterations = manifest.get("iterations") or []
    steady = manifest.get("steady_state") or {}
    phase = iterations[index].get("phase") if index is not None else None
    group = (steady.get("groups") or {}).get(phase) if phase else None
    bounds = group or steady
    if not bounds:
        return None
    # (time, index) of each member, not the entries: a long trace's are made when read
    members = [(judged_time(it), it["index"])
               for it in islice(iterations, bounds["first"], bounds["last"] + 1)
               if it["kind"] != KIND_IDLE and it.get("phase") != PHASE_IDLE
               and (not phase or it.get("phase") == phase) and judged_time(it) is not None]
    if not members:
        return None
    median = quantile(sorted(time for time, _ in members), 0.5)
    return min(members, key=lambda member: (abs(member[0] - median), member[1]))[1]


def _rows(mine: dict, theirs: dict, value: int) -> tuple[list, list, list]:
    """Names in both with the change of field ``value``, those only in ``mine``, only in
    ``theirs``; each sorted by the size of the change."""
    both, only_mine, only_theirs = [], [], []
    for name in sorted(mine.keys() | theirs.keys()):
        a, b = mine.get(name), theirs.get(name)
        if a and b:
            both.append({"name": name, "count": a[0], "baseline_count": b[0],
                         "us": round(a[value], 3), "baseline_us": round(b[value], 3),
                         "delta_us": round(a[value] - b[value], 3)})
        elif a:
            only_mine.append({"name": name, "count": a[0], "us": round(a[value], 3)})
        else:
            only_theirs.append({"name": name, "count": b[0], "us": round(b[value], 3)})
    both.sort(key=lambda r: (-abs(r["delta_us"]), r["name"]))
    only_mine.sort(key=lambda r: (-r["us"], r["name"]))
    only_theirs.sort(key=lambda r: (-r["us"], r["name"]))
    return both, only_mine, only_theirs


def _figures(entry: dict) -> dict:
    breakdown = entry.get("breakdown") or {}
    figures = {"wall_us": judged_time(entry), "duration_us": entry.get("duration_us")}
    figures.update({key: breakdown.get(key) for key in CATEGORIES})
    figures["cpu_op_us"] = (breakdown.get("host") or {}).get("cpu_op_us")
    return figures


def compare(entry: dict, profile: dict, base_entry: dict, base_profile: dict) -> dict:
    """Iteration ``entry`` (a manifest entry, with its piece's ``profile``) against
    ``base_entry``: what changed, and the ``reason`` in a phrase."""
    mine, theirs = _figures(entry), _figures(base_entry)
    categories = [{"name": key, "us": mine[key], "baseline_us": theirs[key],
                   "delta_us": None if mine[key] is None or theirs[key] is None
                   else round(mine[key] - theirs[key], 3)} for key in mine]
    ops, ops_only, ops_only_base = _rows(profile["ops"], base_profile["ops"], 1)
    kernels, kernels_only, kernels_only_base = _rows(profile["kernels"],
                                                     base_profile["kernels"], 1)
    result = {
        "index": entry["index"], "baseline": base_entry["index"], "phase": entry.get("phase"),
        "categories": categories, "ops": ops[:TOP], "ops_only_here": ops_only[:TOP],
        "ops_only_in_baseline": ops_only_base[:TOP], "kernels": kernels[:TOP],
        "kernels_only_here": kernels_only[:TOP],
        "kernels_only_in_baseline": kernels_only_base[:TOP],
    }
    result["reason"] = reason_phrase(categories[0]["delta_us"], profile["ops"],
                                     base_profile["ops"])
    return result


def reason_phrase(delta_us: float | None, ops: dict, base_ops: dict) -> str:
    """``+5.3 ms: eval x1, aten::linear +36, time outside ops +2.0 ms``: the change of the
    wall span, then what accounts for most of it, in its direction: the outermost ops run
    more often (``name +N``; only in this iteration: ``name xN``), weighed by their total
    time, and the other ops by their own time (``name +X ms``; an iteration's own
    ``ProfilerStep`` that way is the time outside ops). Items under 5 % of the change (or
    50 µs) are left out."""
    if delta_us is None:
        return "no time to compare"
    sign = 1 if delta_us >= 0 else -1
    none = [0, 0.0, 0.0, {}]
    counted = {name for name in ops.keys() | base_ops.keys()
               if (ops.get(name, none)[0] - base_ops.get(name, none)[0]) * sign > 0}
    items = []
    for name in sorted(ops.keys() | base_ops.keys()):
        a, b = ops.get(name, none), base_ops.get(name, none)
        if name in counted:
            if _parent(a[3] or b[3], name) in counted:
                continue  # inside an op named already: counted in its time
            text = f"{name} x{a[0]}" if not b[0] else f"{name} {a[0] - b[0]:+d}"
            items.append(((a[2] - b[2]) * sign, text))
        else:  # as often: by its own time
            shown = "time outside ops" if name.startswith("ProfilerStep#") else name
            items.append(((a[1] - b[1]) * sign, f"{shown} {(a[1] - b[1]) / 1000:+.1f} ms"))
    least = max(50.0, 0.05 * abs(delta_us))
    items = sorted((item for item in items if item[0] >= least),
                   key=lambda item: (-round(item[0], 3), item[1]))
    named = ", ".join(text for _, text in items[:REASON_ITEMS])
    return f"{delta_us / 1000:+.1f} ms" + (f": {named}" if named else "")


def _parent(parents: dict, name: str) -> str:
    """The op that holds most instances of ``name`` (not ``name`` itself: an op recorded
    twice, nested in itself)."""
    others = {parent: n for parent, n in parents.items() if parent != name}
    return max(others, key=others.get) if others else ""


def _entry(manifest: dict, index: int) -> dict:
    iterations = manifest.get("iterations") or []
    if not 0 <= index < len(iterations):
        raise ValueError(f"no iteration {index}: the folder holds "
                         + (f"#0-#{len(iterations) - 1}" if iterations else "none"))
    entry = iterations[index]
    if not entry.get("file"):
        raise ValueError(f"iteration {index} has no piece in the folder (left out by a "
                         f"selection)")
    return entry


def diff(out_dir: str, manifest: dict, index: int, baseline: int | None = None) -> dict:
    """Iteration ``index`` of the split folder ``out_dir`` against ``baseline`` (default:
    ``baseline_index``); ``ValueError`` naming what is missing."""
    given = baseline is not None
    entry = _entry(manifest, index)
    if not given:
        baseline = baseline_index(manifest, index)
        if baseline is None:
            raise ValueError("no steady state to compare with: name the other iteration "
                             "(stream-split diff OUT A B)")
    base = _entry(manifest, baseline)
    result = compare(entry, profile_piece(os.path.join(out_dir, entry["file"])),
                     base, profile_piece(os.path.join(out_dir, base["file"])))
    result["baseline_is"] = "given" if given else "steady median"
    return result


#: An outlier whose piece, or its baseline's, holds more events than this is not explained
#: after a split (its ``outlier_reason`` stays the ratio): ``profile_piece`` reads a whole
#: piece, about 1 KB per event (a never-ending iteration of 6.4 M events took 3.5 GB). ``why``
#: and ``diff`` still compare any two pieces.
EXPLAIN_MAX_EVENTS = 100_000


def explain_outliers(out_dir: str, manifest: dict, outliers: list[int] | None = None) -> None:
    """Add to each outlier's ``outlier_reason`` (``7.1x median``) the phrase of its
    comparison with its baseline (``7.1x median, +5.3 ms: eval x1, ...``), where both pieces
    were written and hold at most ``EXPLAIN_MAX_EVENTS`` events. Reads the baseline's piece
    once per phase and one outlier's at a time. ``outliers``: the positions of the outliers
    (``stats.IterationStats.reasons``), else read from the entries."""
    profiles: dict = {}
    bases: dict = {}  # phase -> its baseline's index
    iterations = manifest.get("iterations") or []
    for position in outlier_positions(iterations) if outliers is None else outliers:
        entry = iterations[position]
        if not entry.get("file"):
            continue
        phase = entry.get("phase")
        if phase not in bases:
            bases[phase] = baseline_index(manifest, entry["index"])
        base = bases[phase]
        if base is None or base == entry["index"] or entry["events"] > EXPLAIN_MAX_EVENTS:
            continue
        base_entry = manifest["iterations"][base]
        if not base_entry.get("file") or base_entry["events"] > EXPLAIN_MAX_EVENTS:
            continue
        if base not in profiles:
            profiles[base] = profile_piece(os.path.join(out_dir, base_entry["file"]))
        result = compare(entry, profile_piece(os.path.join(out_dir, entry["file"])),
                         base_entry, profiles[base])
        # assigned, not changed in place: the entries may be made from the records when read
        # (``manifest_entries.ManifestIterations``)
        iterations[position] = {**entry,
                                "outlier_reason": f"{entry['outlier_reason']}, {result['reason']}"}


_FIGURE_NAMES = {"wall_us": "wall span (CPU and GPU)", "duration_us": "CPU window",
                 "compute_us": "GPU compute", "comm_us": "GPU communication",
                 "memcpy_us": "GPU memcpy", "memset_us": "GPU memset", "idle_us": "GPU idle",
                 "cpu_op_us": "host time in ops"}


def _ms(us) -> str:
    return "-" if us is None else f"{us / 1000:.3f}"


def _change(us) -> str:
    return "-" if us is None else f"{us / 1000:+.3f}"


def render_comparison(result: dict) -> str:
    """``diff``'s result as text: the phrase, the figures, then each list of names (ms)."""
    against = ("the steady state's median iteration" if result["baseline_is"] == "steady median"
               else "it")
    phase = f" ({result['phase']})" if result.get("phase") else ""
    lines = [f"#{result['index']}{phase} against #{result['baseline']}, {against}: "
             f"{result['reason']}", "", f"{'ms':<28}{'this':>12}{'baseline':>12}{'change':>12}"]
    for row in result["categories"]:
        lines.append(f"{_FIGURE_NAMES[row['name']]:<28}{_ms(row['us']):>12}"
                     f"{_ms(row['baseline_us']):>12}{_change(row['delta_us']):>12}")
    for key, title in (("ops", "ops whose own time changed most"),
                       ("kernels", "GPU work whose time changed most")):
        rows = [r for r in result[key] if r["delta_us"]]
        if rows:
            lines += ["", f"{title} (count, ms: this, baseline, change):"]
            lines += [f"  {r['count']:>5} {r['baseline_count']:>5} {_ms(r['us']):>10} "
                      f"{_ms(r['baseline_us']):>10} {_change(r['delta_us']):>10}  "
                      f"{r['name'][:100]}" for r in rows]
        for where, text in (("here", "only in this iteration"), ("in_baseline",
                                                                "only in the baseline")):
            rows = result[f"{key}_only_{where}"]
            if rows:
                lines += ["", f"{key} {text} (count, ms):"]
                lines += [f"  {r['count']:>5} {_ms(r['us']):>10}  {r['name'][:100]}"
                          for r in rows]
    return "\n".join(lines)
