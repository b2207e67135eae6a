"""Adversarial traces: inputs shaped to make a splitter's time or memory grow beyond the input's.

Test tooling, not product. Each ``Attack`` writes one trace of a chosen size to a path, events
streamed to the file (never held), so a generator of 6 M events stays small. The families are
those of issue 22: a detector search that grows with names seen a few times each, a million
one-op iterations or unique names (with digits too), one iteration that never closes, a million threads or
processes, metadata copied into every piece, hundreds of thousands of iteration records,
deep nesting, unmatched flows and kernels, and the reading side's bombs (whitespace, a string
or newlines that never end, compressed). ``benchmarks/adversarial.py`` runs them big, under
the CLI, with peak RSS and time; ``tests/core/test_bounds.py`` runs each family small and
checks conservation.
"""
from __future__ import annotations

import gzip
import random
from dataclasses import dataclass
from typing import Callable, Iterator

#: What a generated event line looks like (``ph: X``, one line each).
_OP = '{{"ph":"X","cat":"{cat}","name":"{name}","pid":{pid},"tid":{tid},"ts":{ts},"dur":{dur}}}'


def _op(name: str, ts: int, dur: int, cat: str = "cpu_op", pid: int = 1, tid: int = 1) -> str:
    return _OP.format(cat=cat, name=name, pid=pid, tid=tid, ts=ts, dur=dur)


def _write(path: str, lines: Iterator[str], header: str = "", compress: bool = False) -> int:
    """A JSON-object trace of ``lines`` (events) after ``header`` (keys, each with its comma);
    returns the number of events."""
    n = 0
    opener = gzip.open if compress else open
    with opener(path, "wt", encoding="utf-8") as f:
        f.write("{" + header + '"traceEvents":[\n')
        for line in lines:
            f.write(line if n == 0 else ",\n" + line)
            n += 1
        f.write("\n]}\n")
    return n


def _letters(i: int, width: int = 5) -> str:
    """A name without digits (digits are folded: ``op_12`` and ``op_13`` are one symbol)."""
    return "".join(chr(97 + (i // 26 ** k) % 26) for k in range(width))


def random_names(path: str, n: int) -> int:
    """``n`` top-level ops drawn at random from ``n / 5`` names: no loop, each name seen about
    five times (the unit search's worst case)."""
    rnd = random.Random(22)
    names = [f"op_{_letters(j, 3)}" for j in range(max(1, n // 5))]
    return _write(path, (_op(rnd.choice(names), i * 6, 5) for i in range(n)))


def unique_names(path: str, n: int) -> int:
    """``n`` top-level ops, each with a name of its own."""
    return _write(path, (_op(f"op_{_letters(i)}", i * 6, 5) for i in range(n)))


def numbered_names(path: str, n: int) -> int:
    """``n`` top-level ops, each with a name of its own that holds a digit (each its own
    family: ``op_abcde_3``)."""
    return _write(path, (_op(f"op_{_letters(i)}_{i % 7}", i * 6, 5) for i in range(n)))


def one_op_iterations(path: str, n: int) -> int:
    """``n`` identical top-level ops: ``n`` iterations of one op each."""
    return _write(path, (_op("train_step", i * 6, 5) for i in range(n)))


def _steps(count: int, t0: int = 0) -> Iterator[str]:
    for i in range(count):
        yield _op(f"ProfilerStep#{i}", t0 + i * 12, 10, cat="user_annotation")
        yield _op("aten::mm", t0 + i * 12 + 1, 5)


def many_iterations(path: str, n: int) -> int:
    """``n / 2`` annotated steps of one op each: as many iteration records."""
    return _write(path, _steps(n // 2))


def open_iteration(path: str, n: int) -> int:
    """Eight steps, then a ninth that never closes, holding ``n`` ops."""
    def lines():
        yield from _steps(8)
        yield _op("ProfilerStep#8", 200, 10 ** 12, cat="user_annotation")
        for i in range(n):
            yield _op("aten::add", 201 + 2 * i, 1)
    return _write(path, lines())


def threads(path: str, n: int) -> int:
    """One op on each of ``n`` threads of one process."""
    return _write(path, (_op("aten::mm", i, 1, tid=100 + i) for i in range(n)))


def processes(path: str, n: int) -> int:
    """One op on the main thread of each of ``n`` processes."""
    return _write(path, (_op("aten::mm", i, 1, pid=100 + i, tid=100 + i) for i in range(n)))


def metadata(path: str, n: int) -> int:
    """1 MB of metadata events (thread names), then ``n / 2`` one-op steps."""
    def lines():
        size = 0
        k = 0
        while size < 1 << 20:
            line = ('{"ph":"M","name":"thread_name","pid":1,"tid":%d,"args":{"name":'
                    '"worker thread %s %s"}}' % (1000 + k, _letters(k), "x" * 64))
            size += len(line)
            k += 1
            yield line
        yield from _steps(n // 2)
    return _write(path, lines())


def nested(path: str, n: int) -> int:
    """``n`` ops, each inside the one before."""
    return _write(path, (_op(f"op_{_letters(i % 7, 2)}", i, 2 * (n - i) + 1) for i in range(n)))


def unmatched_flows(path: str, n: int) -> int:
    """``n`` launch-to-kernel flow starts whose kernels never come."""
    return _write(path, ('{"ph":"s","cat":"ac2g","name":"ac2g","id":%d,"pid":1,"tid":1,'
                         '"ts":%d}' % (i, i) for i in range(n)))


def unmatched_kernels(path: str, n: int) -> int:
    """``n`` kernels whose launches never come."""
    return _write(path, ('{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":%d,'
                         '"dur":1,"args":{"correlation":%d}}' % (i, i) for i in range(n)))


def _bomb(path: str, before: str, filler: bytes, size: int, after: str) -> int:
    """A gzip file: ``before``, ``size`` bytes of ``filler`` repeated, ``after``."""
    block = filler * ((1 << 20) // len(filler))
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(before.encode())
        for _ in range(size // len(block)):
            f.write(block)
        f.write(after.encode())
    return 2


def whitespace_bomb(path: str, n: int) -> int:
    """Two events with ``n`` bytes of whitespace between them, gzipped."""
    return _bomb(path, '{"traceEvents":[' + _op("a", 0, 1) + ",", b" \n\t", n,
                 _op("b", 2, 1) + "]}")


def string_bomb(path: str, n: int) -> int:
    """An event whose name is ``n`` bytes long (a string that does not end soon), gzipped."""
    _bomb(path, '{"traceEvents":[' + _op("a", 0, 1) + ',{"ph":"X","name":"', b"x", n,
          '","ts":2,"dur":1,"pid":1,"tid":1}]}')
    return 2


def header_string(path: str, n: int) -> int:
    """A header key whose value is ``n`` bytes long, then two events, gzipped."""
    _bomb(path, '{"comment":"', b"y", n, '","traceEvents":[' + _op("a", 0, 1) + ","
          + _op("b", 2, 1) + "]}")
    return 2


def newlines_jsonl(path: str, n: int) -> int:
    """JSON Lines: an event, ``n`` bytes of empty lines, an event, gzipped."""
    _bomb(path, _op("a", 0, 1) + "\n", b"\n", n, _op("b", 2, 1) + "\n")
    return 2


@dataclass(frozen=True)
class Attack:
    """One family of adversarial input."""
    name: str
    make: Callable[[str, int], int]  # (path, size) -> events written
    big: int  # the size the benchmark runs (events, or bytes for the bombs)
    small: int  # the size the tests run
    suffix: str = ".json"
    #: Whose layer bounds it: "core" (the detector, the engine, the writer) or "read" (the
    #: decoder).
    layer: str = "core"
    #: Whether ``benchmarks/adversarial.py --scale`` shrinks it (not a case already small).
    scales: bool = True


ATTACKS = (
    Attack("random_names", random_names, 2_000, 300, scales=False),
    # the same family long enough for a time per event (the 2,000 ops above, issue 22's
    # case, take some 20 ms beyond the start-up: less than the start-up's own spread)
    Attack("random_names_long", random_names, 200_000, 3_000),
    Attack("unique_names", unique_names, 1_000_000, 3_000),
    Attack("numbered_names", numbered_names, 1_000_000, 3_000),
    Attack("one_op_iterations", one_op_iterations, 1_000_000, 3_000),
    Attack("open_iteration", open_iteration, 6_400_000, 5_000),
    Attack("threads", threads, 1_000_000, 3_000),
    Attack("processes", processes, 1_000_000, 3_000),
    Attack("metadata", metadata, 600, 60, scales=False),
    Attack("many_iterations", many_iterations, 600_000, 1_000),
    Attack("nested", nested, 1_000_000, 3_000),
    Attack("unmatched_flows", unmatched_flows, 1_000_000, 3_000),
    Attack("unmatched_kernels", unmatched_kernels, 1_000_000, 3_000),
    Attack("whitespace_bomb", whitespace_bomb, 1 << 30, 1 << 20, ".json.gz", "read"),
    Attack("string_bomb", string_bomb, 1 << 30, 1 << 20, ".json.gz", "read"),
    Attack("header_string", header_string, 1 << 30, 1 << 20, ".json.gz", "read"),
    Attack("newlines_jsonl", newlines_jsonl, 1 << 30, 1 << 20, ".jsonl.gz", "read"),
)

BY_NAME = {attack.name: attack for attack in ATTACKS}
