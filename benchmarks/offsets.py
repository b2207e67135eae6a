#!/usr/bin/env python3
"""Where in a trace file each boundary record comes out: the input offset of every record.

    python benchmarks/offsets.py TRACE... [--detector structure] [--chunk N] [--json out.json]

Kineto writes a file in sections (each thread's CPU ops first, the GPU activity last), so a
splitter that waits for the GPU section, or for the end, emits its boundaries late. For each
trace this reads the file once through the real reader and engine (the header handed over as
the CLI does) and reports, for each boundary (and revision) record, the number of JSON bytes
read when it came out, as a share of the whole input; and where the loop thread's CPU section
ends (the offset of its last structural op). Each boundary is counted once:

- ``in_section``: out at the latest with the event that tells the loop thread's CPU section
  has ended: the first op of another thread, Python frame, launch or GPU work after the
  thread's last structural op (a few runtime calls that launch nothing may come between);
- ``after_section``: later, before the end of the input;
- ``at_close``: only at the end of the input.

The offset has the granularity of the reader's chunks (one batch of events per chunk,
``--chunk`` bytes of JSON, 64 KiB by default: a small trace is a few chunks at the CLI's
512 KiB): a record reported at offset X came out while the parser held bytes up to X. The
counts above are per event, not per chunk.
"""
from __future__ import annotations

import argparse
import json
import sys

from stream_split.core import Splitter, SplitOptions
from stream_split.read import TraceReader
from stream_split.trace_format import GPU_WORK_CATS, LAUNCH_NAMES, PYTHON_FRAME_CAT, STRUCTURE_CATS

#: Bytes of JSON per read (a compressed input is read in a 16th of it).
CHUNK = 64 * 1024


def record_offsets(path: str, detector: str = "structure", chunk: int = CHUNK) -> dict:
    """Where each boundary / revision record of ``path`` came out (see the module docstring)."""
    splitter = Splitter(SplitOptions(detector=detector, keep_events=False))
    records = []  # (type, index of the event it came out with, JSON bytes read then)
    last_op = {}  # thread -> (event index, bytes read) of its latest structural op
    ender = {}  # thread -> index of the first event after its latest op that ends a section
    index = -1
    with TraceReader(path, chunk_size=chunk) as reader:
        splitter.note_header(reader.header_before)
        for batch in reader.batches():
            for event in batch.events:
                index += 1
                splitter.feed(event)
                cat = event.get("cat")
                thread = (event.get("pid"), event.get("tid"))
                if cat in STRUCTURE_CATS or cat in GPU_WORK_CATS or cat == PYTHON_FRAME_CAT \
                        or event.get("name") in LAUNCH_NAMES:
                    for other, first in ender.items():
                        if first is None and (other != thread or cat not in STRUCTURE_CATS):
                            ender[other] = index
                if cat in STRUCTURE_CATS:
                    last_op[thread] = (index, reader.bytes_read)
                    ender[thread] = None
                records.extend((record.to_dict()["type"], index, reader.bytes_read)
                               for record in splitter.pop_records())
            while True:  # spilled events: decided a batch at a time
                decided = splitter.decided()
                records.extend((record.to_dict()["type"], index, reader.bytes_read)
                               for record in decided.records)
                if not decided.more:
                    break
        total = reader.bytes_read
    splitter.close()
    closing = [r.to_dict()["type"] for r in splitter.pop_records()]
    loop = splitter.evidence.get("loop_thread") or []
    loop = tuple(loop) if len(loop) == 2 else None
    has_loop = loop in last_op
    section_end = last_op[loop][1] if has_loop else None
    ends_at = ender.get(loop)
    online = [(i, o) for t, i, o in records if t == "boundary"]
    in_section = sum(1 for i, _ in online if has_loop and (ends_at is None or i <= ends_at))
    return {"trace": path, "detector": detector, "bytes": total,
            "decided": splitter.evidence.get("decided"),
            "waited": splitter.evidence.get("waited"),
            "boundaries": len(online) + closing.count("boundary"),
            "in_section": in_section, "after_section": len(online) - in_section,
            "at_close": closing.count("boundary"),
            "revisions": sum(1 for t, _, _ in records if t == "revision")
            + closing.count("revision"),
            "offsets": [round(o / total, 4) for _, o in online],
            "loop_section_end": round(section_end / total, 4) if section_end else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--detector", default="structure", choices=["auto", "structure", "steps"])
    ap.add_argument("--json", default=None)
    ap.add_argument("--chunk", type=int, default=CHUNK,
                    help="bytes of JSON per read (the offsets' granularity)")
    args = ap.parse_args(argv)
    results = []
    for path in args.traces:
        r = record_offsets(path, args.detector, args.chunk)
        results.append(r)
        offs = r["offsets"]
        print(f"{path}: {r['boundaries']} boundaries: {r['in_section']} by the end of the loop "
              f"thread's CPU section, {r['after_section']} after it, {r['at_close']} at close "
              f"({r['revisions']} revisions); offsets {offs[0] if offs else '-'} .. "
              f"{offs[-1] if offs else '-'} of the input; the section ends at "
              f"{r['loop_section_end']}; {r['decided']}"
              + (f" (it waited: {r['waited']})" if r["waited"] else ""), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
