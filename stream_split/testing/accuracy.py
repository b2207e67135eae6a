"""Accuracy harness: how right is the structural detector?

    python -m stream_split.accuracy                      # generated scenarios (ground truth)
    python -m stream_split.accuracy --shared ../shared/traces [--json report.json]

Two kinds of reference, the method TraceLens's maintainers used (strip the annotations,
compare with the annotated answer):
- generated traces (``stream_split.testing.generate``): their ground truth, owner by owner;
- real traces with ``ProfilerStep#N`` spans: the split by those spans is the reference; the
  detector runs with the spans made invisible (``--detector structure``);
- real traces whose answer is known only as a count (``KNOWN_COUNTS``, from the corpus README).

Per trace it reports iterations expected / found / exactly right (same CPU ops and kernels as
a reference iteration) and the share of CPU ops and kernels placed in the right iteration.
This is a measuring tool, not a test: tests assert on the generated scenarios separately.
"""
from __future__ import annotations

import argparse
from bisect import bisect_right
import json
import sys
from collections import Counter
from dataclasses import dataclass, asdict
from pathlib import Path

from stream_split.core import METADATA, OUTSIDE, SplitOptions, Splitter
from stream_split.read import TraceReader
from stream_split.trace_format import (
    CPU_OP_CATS, KERNEL_CATS, PROFILER_STEP_PREFIX, STRUCTURE_CATS)

#: Iteration counts known for real traces of ../shared/traces (from its README).
KNOWN_COUNTS = {
    "tracelens/mi300/resnet_act_checkpoint.json.gz": 3,
    "tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz": 5,
    "tracelens/mi300/google_owlv2-large-patch14-ensemble__1016001.json.gz": 5,
    "tracelens/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz": 4,
    "tracelens/inference/xdit_flux.1_aiter_sage/profile_trace_rank_0.json.gz": 4,
    **{f"tracelens/{gpu}/{name}": 1 for gpu in ("h100", "mi300") for name in (
        "gaunernst_bert-small-uncased__1016001.json.gz",
        "Falconsai_nsfw_image_detection__1016002.json.gz",
        "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
        "facebook_timesformer-base-finetuned-k400__1016002.json.gz")},
    "torch_cpu/s1_schedule_step.json.gz": 6,
    "torch_cpu/s2_no_schedule.json.gz": 8,
    "torch_cpu/s3_repeat_cycle1.pt.trace.json.gz": 3,
    "torch_cpu/s3_repeat_cycle2.pt.trace.json.gz": 3,
    "torch_cpu/s4_stack_shapes.json.gz": 4,
    "torch_cpu/s5b_two_threads_all.json.gz": 6,
    "torch_cpu/s6_varlen_unannotated.json.gz": 10,
    "torch_cpu/s8_python_export.json.gz": 6,
}


#: Noise rates of the noisy variants: mutations per step, as a share of its top-level ops.
NOISE_RATES = (0.1, 0.2, 0.3)


@dataclass
class Score:
    trace: str
    reference: str
    expected: int
    found: int
    exactly_right: int | None = None
    cpu_ops_right: float | None = None
    kernels_right: float | None = None
    unit: str = ""

    @property
    def ok(self) -> bool:
        return self.expected == self.found and (self.exactly_right is None
                                                or self.exactly_right >= self.expected)


def _is_scored(event: dict) -> str | None:
    cat = event.get("cat")
    if cat in CPU_OP_CATS:
        return "cpu"
    if cat in KERNEL_CATS:
        return "kernel"
    return None


def _between_steps(events: list) -> list:
    """Per event: is it a CPU op that lies between two reference steps or across an edge of
    one (inside the loop's span, yet not inside exactly one ``ProfilerStep#N``)? Such ops may
    go either side (the acceptance of issue 8); the steps' own split puts them somewhere, so
    they are not scored."""
    spans = sorted((e["ts"], e["ts"] + (e.get("dur") or 0)) for e in events
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
                   and e.get("cat") in STRUCTURE_CATS)
    if not spans:
        return [False] * len(events)
    lo, hi = spans[0][0], max(b for _, b in spans)
    starts = [a for a, _ in spans]

    def inside_one(e: dict) -> bool:
        ts, end = e["ts"], e["ts"] + (e.get("dur") or 0)
        k = bisect_right(starts, ts) - 1
        return k >= 0 and end <= spans[k][1]

    return [e.get("cat") in CPU_OP_CATS and lo <= e.get("ts", lo - 1) < hi and not inside_one(e)
            for e in events]


def compare(events: list, reference: list, found: list, either_side: list | None = None) -> dict:
    """Owners of the same events under a reference and under the detector -> scores. Events
    marked in ``either_side`` are not scored."""
    if either_side is not None:
        keep = [not x for x in either_side]
        events = [e for e, k in zip(events, keep) if k]
        reference = [r for r, k in zip(reference, keep) if k]
        found = [f for f, k in zip(found, keep) if k]
    ref_iters = {o for o in reference if o is not None and o >= 0}
    overlap = Counter((f, r) for f, r, e in zip(found, reference, events) if _is_scored(e))
    best_ref = {}
    for (f, r), n in sorted(overlap.items(), key=lambda kv: -kv[1]):
        if f is not None and f >= 0 and f not in best_ref:
            best_ref[f] = r
    right = {"cpu": [0, 0], "kernel": [0, 0]}
    members: dict = {}
    for f, r, e in zip(found, reference, events):
        kind = _is_scored(e)
        if kind is None:
            continue
        mapped = best_ref.get(f, OUTSIDE) if f is not None and f >= 0 else OUTSIDE
        right[kind][0] += mapped == r
        right[kind][1] += 1
        members.setdefault(r, set()).add(f)
        members.setdefault(("found", f), set()).add(r)
    exact = sum(1 for r in ref_iters
                if len(members.get(r, ())) == 1
                and members.get(("found", next(iter(members[r]))), set()) == {r})
    share = {k: (v[0] / v[1] if v[1] else None) for k, v in right.items()}
    return {"exactly_right": exact, "cpu_ops_right": share["cpu"],
            "kernels_right": share["kernel"]}


def owners(events: list, options: SplitOptions, header: dict | None = None
           ) -> tuple[list, Splitter]:
    """Each event's owner, the events fed in file order after the header keys ``header``
    (as the CLI does)."""
    splitter = Splitter(options)
    splitter.note_header(header)
    index = {id(e): i for i, e in enumerate(events)}
    for e in events:
        splitter.feed(e)
    splitter.close()
    out: list = [None] * len(events)
    for owner, e in splitter.pop_assigned():
        out[index[id(e)]] = None if owner == METADATA else owner
    return out, splitter


def score_generated(scenarios=None, seeds=range(3), detector: str = "auto") -> list[Score]:
    from stream_split.testing.generate import SCENARIOS, generate
    scores = []
    for name in scenarios or sorted(SCENARIOS):
        for seed in seeds:
            trace = generate(name, seed=seed)
            got, splitter = owners(trace.events, SplitOptions(detector=detector),
                                   trace.header_before)
            expected = sum(1 for it in trace.truth.iterations if it["kind"] == "iteration")
            found = sum(1 for it in splitter.iterations if it.kind == "iteration")
            scores.append(Score(f"{name}#{seed}", "ground truth", expected, found,
                                unit=" ".join(splitter.evidence.get("unit") or []),
                                **compare(trace.events, trace.truth.owners, got)))
    return scores


def score_real(path: Path, root: Path) -> Score:
    rel = str(path.relative_to(root))
    events, header = read_trace(path)
    unit = lambda sp: " ".join(sp.evidence.get("unit") or [])
    if _step_spans(events) >= 2:
        return score_stripped(events, rel, "ProfilerStep#N (stripped)", header)
    got, splitter = owners(events, SplitOptions(detector="auto"), header)
    found = sum(1 for it in splitter.iterations if it.kind == "iteration")
    expected = KNOWN_COUNTS.get(rel, -1)
    return Score(rel, "known count" if expected >= 0 else "unknown", expected, found,
                 unit=unit(splitter))


def score_stripped(events: list, name: str, reference: str, header: dict | None = None
                   ) -> Score:
    """A trace with ``ProfilerStep#N`` spans: the split by those spans is the reference; the
    detector runs with them made invisible."""
    ref, ref_splitter = owners(events, SplitOptions(detector="steps"), header)
    got, splitter = owners(events, SplitOptions(detector="structure"), header)
    found = sum(1 for it in splitter.iterations if it.kind == "iteration")
    return Score(name, reference, _steps_with_events(events, ref), found,
                 unit=" ".join(splitter.evidence.get("unit") or []),
                 **compare(events, ref, got, _between_steps(events)))


def _is_step_span(event: dict) -> bool:
    """A ``ProfilerStep#N`` span, or its GPU mirror."""
    return str(event.get("name", "")).startswith(PROFILER_STEP_PREFIX)


def _steps_with_events(events: list, reference: list) -> int:
    """The reference steps that own an event besides their own ``ProfilerStep#N`` span. A
    turn that recorded nothing (a GPU server's idle poll: ``time.sleep``, no op, no launch,
    no kernel, nothing on any thread) leaves no event once its span is stripped: no split
    can make it a piece, so it is not expected (tests/data/cuda/README.md)."""
    return len({r for r, e in zip(reference, events)
                if r is not None and r >= 0 and not _is_step_span(e)})


def _step_spans(events: list) -> int:
    return sum(1 for e in events if e.get("cat") in STRUCTURE_CATS
               and str(e.get("name", "")).startswith(PROFILER_STEP_PREFIX))


def read_events(path) -> list:
    return read_trace(path)[0]


def read_trace(path) -> tuple[list, dict]:
    """The events of the trace at ``path`` and its header keys written before them."""
    events: list = []
    header: dict = {}
    try:
        with TraceReader(str(path)) as reader:
            header = reader.header_before
            events.extend(reader)
    except Exception:  # noqa: BLE001 - a broken corpus file is reported, not fatal
        pass
    return events, header


def score_noisy(root: Path, rates=NOISE_RATES, seeds=range(3), copies: int = 1) -> list[Score]:
    """Noisy variants (``stream_split.testing.noise``) of every trace under ``root`` with at
    least two ``ProfilerStep#N`` spans, split with the spans stripped."""
    from stream_split.testing.noise import noisy_events
    scores = []
    for path in sorted(root.rglob("*.json.gz")):
        events, header = read_trace(path)
        if _step_spans(events) < 2:
            continue
        rel = str(path.relative_to(root))
        for rate in rates:
            for seed in seeds:
                noisy = noisy_events(events, rate, seed, copies)
                tag = f"{rel} {int(rate * 100)}%#{seed}" + (f" x{copies}" if copies > 1 else "")
                scores.append(score_stripped(noisy, tag, "noisy ProfilerStep (stripped)",
                                             header))
    return scores


#: Generated scenarios scored in noisy variants (``--noise``): generated with their steps
#: annotated (``annotate_steps=True``), made noisy like a real trace, split with the steps
#: stripped.
NOISY_SCENARIOS = ("step_bookkeeping", "wrapped_steps")


def score_noisy_generated(scenarios=NOISY_SCENARIOS, rates=NOISE_RATES, seeds=range(3)
                          ) -> list[Score]:
    """Noisy variants of generated scenarios whose steps are annotated: the loops of issue
    21 (the loop's edge, the user's frames before a step's first op) as noise varies them."""
    from stream_split.testing.generate import generate
    from stream_split.testing.noise import noisy_events
    scores = []
    for name in scenarios:
        trace = generate(name, seed=0, annotate_steps=True)
        for rate in rates:
            for seed in seeds:
                scores.append(score_stripped(
                    noisy_events(trace.events, rate, seed), f"{name} {int(rate * 100)}%#{seed}",
                    "noisy ProfilerStep (stripped)", trace.header_before))
    return scores


def render(scores: list[Score]) -> str:
    lines = [f"{'trace':62s} {'reference':30s} {'exp':>4s} {'found':>5s} {'exact':>5s} "
             f"{'cpu ok':>6s} {'krn ok':>6s}  unit"]
    for s in scores:
        pct = lambda x: "-" if x is None else f"{100 * x:.0f}%"
        lines.append(f"{s.trace[-62:]:62s} {s.reference[:30]:30s} {s.expected:4d} {s.found:5d} "
                     f"{'-' if s.exactly_right is None else s.exactly_right:>5} "
                     f"{pct(s.cpu_ops_right):>6s} {pct(s.kernels_right):>6s}  {s.unit[:50]}")
    judged = [s for s in scores if s.expected >= 0]
    lines.append(f"{sum(s.ok for s in judged)}/{len(judged)} traces with the right answer")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=None,
                    help="directory of real traces (../shared/traces) to score as well")
    ap.add_argument("--no-generated", action="store_true")
    ap.add_argument("--json", type=Path, default=None, help="write the scores as JSON")
    ap.add_argument("--noise", action="store_true",
                    help="with --shared: noisy variants of the traces with ProfilerStep#N "
                         f"(rates {', '.join(f'{r * 100:.0f}%%' for r in NOISE_RATES)}, 3 seeds each); "
                         "without --no-generated, also of the scenarios "
                         f"{', '.join(NOISY_SCENARIOS)}")
    ap.add_argument("--copies", type=int, default=1,
                    help="with --noise: tile this many noisy copies of each trace")
    args = ap.parse_args(argv)
    scores = [] if args.no_generated else score_generated()
    if args.shared and not args.noise:
        for path in sorted(args.shared.rglob("*.json.gz")):
            scores.append(score_real(path, args.shared))
    if args.shared and args.noise:
        scores.extend(score_noisy(args.shared, copies=args.copies))
    if args.noise and not args.no_generated:
        scores.extend(score_noisy_generated())
    print(render(scores))
    if args.json:
        args.json.write_text(json.dumps([asdict(s) for s in scores], indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
