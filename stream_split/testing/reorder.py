"""Copies of a trace with each thread's ops in another order: test inputs for ``core.order``.

What it is for: the profiler of torch 1.8 / 1.9 wrote each thread's ops in end order (children
before their parent), and a file may be shuffled a little; the splitter must give the same
split whatever the order within a thread. ``reordered(events, order)`` permutes each thread's
structural ops (``cpu_op``, ``user_annotation``; ``cats`` for others) among the places they hold
in the file, every other event keeping its place:

- ``"end"``: by end; of ops that end together, the later-starting (the child) first, and of
  ops alike, the one written later in start order;
- ``"shuffled"``: each op moved at most ``window`` places (its rank plus a seeded random
  offset below ``window``);
- ``"start"``: the file as it is.

Returns the new list and, for each of its events, the index of the event it came from, so a
test compares owners event by event. (``testing.layout``'s converter to torch 1.8's layout
permutes its ``Operator`` spans with it.)

CLI: ``python -m stream_split.testing.reorder IN OUT --order end|shuffled [--window 8]``.
"""
from __future__ import annotations

import argparse
import random

from stream_split.testing.accuracy import read_trace
from stream_split.testing.generate import _dumps, _open_out
from stream_split.trace_format import STRUCTURE_CATS

ORDERS = ("start", "end", "shuffled")


def _places(events: list, cats) -> dict:
    """(pid, tid) -> the places of that thread's ``X`` ops of ``cats``, in file order."""
    places: dict = {}
    for i, e in enumerate(events):
        if e.get("ph") == "X" and e.get("cat") in cats:
            places.setdefault((e.get("pid"), e.get("tid")), []).append(i)
    return places


def _end_key(e: dict, place: int) -> tuple:
    start = e.get("ts") or 0
    return (start + (e.get("dur") or 0), -start, -place)


def reordered(events: list, order: str, *, window: int = 8, seed: int = 0,
              cats=STRUCTURE_CATS) -> tuple[list, list]:
    """(events, origin): ``events`` with each thread's ops of ``cats`` in ``order``."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")
    origin = list(range(len(events)))
    if order == "start":
        return list(events), origin
    rng = random.Random(seed)
    for places in _places(events, cats).values():
        if order == "end":
            new = sorted(places, key=lambda i: _end_key(events[i], i))
        else:
            key = {i: rank + rng.random() * window for rank, i in enumerate(places)}
            new = sorted(places, key=key.__getitem__)
        for i, j in zip(places, new):
            origin[i] = j
    return [events[j] for j in origin], origin


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input")
    parser.add_argument("output", help="written gzip-compressed when it ends in .gz")
    parser.add_argument("--order", choices=ORDERS, default="end")
    parser.add_argument("--window", type=int, default=8, help="for --order shuffled")
    parser.add_argument("--seed", type=int, default=0, help="for --order shuffled")
    args = parser.parse_args(argv)
    events, header = read_trace(args.input)
    out, _ = reordered(events, args.order, window=args.window, seed=args.seed)
    with _open_out(args.output) as f:
        f.write("{")
        for key, value in header.items():
            f.write(f"{_dumps(key)}: {_dumps(value)}, ")
        f.write('"traceEvents": [\n')
        f.write(",\n".join(map(_dumps, out)))
        f.write("\n]}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
