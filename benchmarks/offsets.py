#!/usr/bin/env python3
"""Where in a trace file each boundary record comes out: the input offset of every record.

    python benchmarks/offsets.py TRACE... [--detector structure] [--json out.json]

Kineto writes a file in sections (each thread's CPU ops first, the GPU activity last), so a
splitter that waits for the GPU section, or for the end, emits its boundaries late. For each
trace this reads the file once through the real reader and engine and reports, for each
boundary (and revision) record, the number of JSON bytes read when it came out, as a share
of the whole input; and where the loop thread's CPU section ends (the offset of its last
structural op). A boundary that only comes out at close is counted as ``at_close``.

The offset has the granularity of the reader's chunks (one batch of events per chunk,
``--chunk`` bytes of JSON, 64 KiB by default: a small trace is a few chunks at the CLI's
512 KiB): a record reported at offset X came out while the parser held bytes up to X.
"""
from __future__ import annotations

import argparse
import json
import sys

from stream_split.core import Splitter, SplitOptions
from stream_split.read import TraceReader
from stream_split.trace_format import STRUCTURE_CATS


#: Bytes of JSON per read (a compressed input is read in a 16th of it).
CHUNK = 64 * 1024


def record_offsets(path: str, detector: str = "structure", chunk: int = CHUNK) -> dict:
    """Offsets (JSON bytes read) of each boundary / revision record of ``path``."""
    splitter = Splitter(SplitOptions(detector=detector, keep_events=False))
    offsets, last_op = [], {}
    with TraceReader(path, chunk_size=chunk) as reader:
        splitter.note_header(reader.header_before)
        for batch in reader.batches():
            for event in batch.events:
                splitter.feed(event)
                if event.get("cat") in STRUCTURE_CATS:
                    last_op[(event.get("pid"), event.get("tid"))] = reader.bytes_read
            while True:
                decided = splitter.decided()
                offsets.extend((record.to_dict()["type"], reader.bytes_read)
                               for record in decided.records)
                if not decided.more:
                    break
        total = reader.bytes_read
    splitter.close()
    at_close = [r.to_dict()["type"] for r in splitter.pop_records()]
    at_close = [t for t in at_close if t != "iteration"]
    loop = splitter.evidence.get("loop_thread") or []
    section_end = last_op.get(tuple(loop)) if len(loop) == 2 else None
    boundaries = [o for t, o in offsets if t == "boundary"]
    return {"trace": path, "detector": detector, "bytes": total,
            "decided": splitter.evidence.get("decided"),
            "waited": splitter.evidence.get("waited"),
            "boundaries": len(boundaries) + at_close.count("boundary"),
            "online": len(boundaries), "at_close": at_close.count("boundary"),
            "revisions": sum(1 for t, _ in offsets if t == "revision")
            + at_close.count("revision"),
            "offsets": [round(o / total, 4) for o in boundaries],
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
        print(f"{path}: {r['boundaries']} boundaries, {r['online']} before the end "
              f"({r['at_close']} at close, {r['revisions']} revisions); offsets "
              f"{offs[0] if offs else '-'} .. {offs[-1] if offs else '-'} of the input; "
              f"loop thread's CPU section ends at {r['loop_section_end']}; {r['decided']}"
              + (f" (it waited: {r['waited']})" if r["waited"] else ""),
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
