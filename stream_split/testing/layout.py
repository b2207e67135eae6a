"""Old profiler layouts from today's traces: the layout converter.

What it is for: the PyTorch profiler of torch 1.8 / 1.9 wrote another layout than today's
Kineto (``stream_split.trace_format.LEGACY_CATS`` says which categories; read from Kineto's
early ``libkineto/src/output_json.cpp`` and the TensorBoard plugin's ``trace.py`` and tests,
which read both). ``to_legacy(events, order=...)`` turns any trace of today's layout (a list of
event dicts) into that layout, so that every generated scenario and real trace can be checked
in both:

- categories: ``cpu_op`` and ``user_annotation`` -> ``Operator`` (``ProfilerStep#N`` included),
  ``cuda_runtime`` and ``cuda_driver`` -> ``Runtime``, ``kernel`` -> ``Kernel``,
  ``gpu_memcpy`` -> ``Memcpy``, ``gpu_memset`` -> ``Memset``; ``Trace`` stays;
- launch flows: ``ac2g`` -> category ``async``, name ``launch`` (the ``s`` on the launching
  thread, the ``f`` with ``bp: "e"`` on the GPU stream), ``id`` the correlation id as before;
- ``args``: no ``Ev Idx``; runtime calls and GPU work carry ``"external id"`` (lowercase);
- thread ids: written as strings (``"123"``), GPU streams as ``"stream 7"``, as the old writer
  did (the flow start kept its integer thread id, as there);
- ``gpu_user_annotation`` is left out: that profiler wrote no GPU mirror of an annotation.
  Events of other categories (Python frames, instants, ``fwdbwd`` flows, metadata) pass
  unchanged;
- ``whole_us=True``: times in whole µs, truncated, as that writer wrote them (``ts / 1000``
  of nanoseconds); by default the times are kept, so that a split compares to the original's
  to the digit.

``order``: ``"start"`` keeps the file order; ``"end"`` writes each thread's ops in the order
they end, children before their parent, as torch 1.8 did; ``"shuffled"`` moves each of a
thread's ops at most ``window`` places (seeded). Only the places that the thread's ops hold
are permuted: every other event keeps its place.

The result (``LegacyTrace``) has the events and, for each, the index of the event it came
from (``origin``), so a test compares owners event by event. The header keys pass through.

CLI: ``python -m stream_split.testing.layout IN OUT [--order end] [--form array]``.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from stream_split.testing.accuracy import read_trace
from stream_split.testing.generate import render, _open_out
from stream_split.testing.reorder import ORDERS, reordered
from stream_split.trace_format import (
    ANNOTATION_CAT, GPU_ANNOTATION_CAT, GPU_WORK_CATS, LAUNCH_FLOW_CAT, LEGACY_CATS,
    METADATA_PHASE)


#: Today's category -> the old one (the inverse of ``LEGACY_CATS``, and what it merged).
_TO_LEGACY = {today: old for old, today in LEGACY_CATS.items()}
#: The old layout's one category of CPU ops, ``record_function`` spans included.
_OPERATOR = _TO_LEGACY["cpu_op"]
_TO_LEGACY.update({ANNOTATION_CAT: _OPERATOR, "cuda_driver": _TO_LEGACY["cuda_runtime"]})
#: The launch flow as torch 1.8's Kineto wrote it.
_FLOW_CAT, _FLOW_NAME = "async", "launch"
#: GPU work in the old layout: on a thread named ``stream N``.
_GPU_WORK = frozenset(_TO_LEGACY.get(cat, cat) for cat in GPU_WORK_CATS)
#: Categories whose ``External id`` the old writer spelled ``external id``.
_LOWER_EXTERNAL_ID = _GPU_WORK | {"Runtime"}


@dataclass
class LegacyTrace:
    """A trace in the old layout: ``origin[i]`` is the index, among the events given to
    ``to_legacy``, of the event that ``events[i]`` came from. Renders like a ``GeneratedTrace``
    (``generate.render``)."""
    events: list
    origin: list
    header_before: dict = field(default_factory=dict)
    header_after: dict = field(default_factory=dict)


def _stream(tid):
    return f"stream {tid}" if isinstance(tid, int) else tid


def _whole_us(e: dict) -> dict:
    """``e`` with ``ts`` and ``dur`` truncated to whole µs (the old writer's integers)."""
    for key in ("ts", "dur"):
        if isinstance(e.get(key), float):
            e[key] = int(e[key])
    return e


def _legacy_event(e: dict) -> dict | None:
    """One event in the old layout (a new dict), or None when that layout has no such event."""
    cat = e.get("cat")
    if e.get("ph") == METADATA_PHASE or cat is None:
        return dict(e)
    if cat == GPU_ANNOTATION_CAT:
        return None
    out = dict(e)
    tid = e.get("tid")
    if cat == LAUNCH_FLOW_CAT:
        out["cat"], out["name"] = _FLOW_CAT, _FLOW_NAME
        if e.get("ph") == "f":
            out["tid"] = _stream(tid)
        return out
    cat = out["cat"] = _TO_LEGACY.get(cat, cat)
    if cat in _GPU_WORK:
        out["tid"] = _stream(tid)
    elif isinstance(tid, int):
        out["tid"] = str(tid)
    args = e.get("args")
    if isinstance(args, dict):
        args = dict(args)
        args.pop("Ev Idx", None)
        if cat in _LOWER_EXTERNAL_ID and "External id" in args:
            args["external id"] = args.pop("External id")
        out["args"] = args
    return out


def to_legacy(events: list, order: str = "start", *, window: int = 8, seed: int = 0,
              whole_us: bool = False, header_before: dict | None = None,
              header_after: dict | None = None) -> LegacyTrace:
    """``events`` (today's layout, left unchanged) in torch 1.8's layout, in ``order``
    ("start", "end" or "shuffled": each op moved at most ``window`` places, by ``seed``);
    ``whole_us``: times truncated to whole µs."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")
    out, origin = [], []
    for i, e in enumerate(events):
        legacy = _legacy_event(e)
        if legacy is not None:
            out.append(_whole_us(legacy) if whole_us else legacy)
            origin.append(i)
    if order != "start":  # each thread's Operator spans permuted among the places they hold
        out, moved = reordered(out, order, window=window, seed=seed, cats={_OPERATOR})
        origin = [origin[j] for j in moved]
    return LegacyTrace(out, origin, dict(header_before or {}), dict(header_after or {}))


def write_legacy(trace: LegacyTrace, path: str, form: str = "object") -> None:
    """Write ``trace`` to ``path`` (gzip for ``.gz``) in ``form``: "object" or "array" (the
    bare ``[...]`` form that some old files have)."""
    with _open_out(path) as f:
        f.write(render(trace, form))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m stream_split.testing.layout",
        description="Write a trace of today's layout in torch 1.8's layout.")
    parser.add_argument("input")
    parser.add_argument("output", help="a .json or .json.gz path, or - for stdout")
    parser.add_argument("--order", choices=ORDERS, default="start")
    parser.add_argument("--window", type=int, default=8, help="for --order shuffled")
    parser.add_argument("--seed", type=int, default=0, help="for --order shuffled")
    parser.add_argument("--form", choices=("object", "array"), default="object")
    parser.add_argument("--whole-us", action="store_true",
                        help="times truncated to whole microseconds, as torch 1.8 wrote them")
    args = parser.parse_args(argv)
    events, header = read_trace(args.input)
    trace = to_legacy(events, args.order, window=args.window, seed=args.seed,
                      whole_us=args.whole_us, header_before=header)
    write_legacy(trace, args.output, args.form)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
