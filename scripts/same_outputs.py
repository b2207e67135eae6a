"""Fingerprint what the commands write, to show that a refactoring changed no output.

    python scripts/same_outputs.py record before.json     # on the old code
    python scripts/same_outputs.py record after.json      # on the new code
    python scripts/same_outputs.py compare before.json after.json

For every input of the corpus it runs ``boundaries`` (JSON Lines and protobuf), ``tag``,
``explain --json`` and ``split`` (pieces decompressed, manifest, in file order) under each
detector and keeps one SHA-256 per output. The corpus: every trace under ``../shared/traces``
(when present), every recording in ``tests/data``, and generated scenarios (every scenario at
several seeds, the random variants of the property tests, and noisy copies), written once
into a scratch folder by this project's own generator.

It runs the command line of the checkout it sits in (``python -m stream_split.cli`` with this
checkout first on ``PYTHONPATH`` and as the working folder, so a git worktree measures its own
code whatever folder the script is started from), two at a time. The traces of ``tests/data``
and ``../shared`` are named relative to the checkout, so a recording does not depend on where
the checkout lies.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from stream_split.testing.generate import SCENARIOS, generate, random_variant, write_trace

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "traces"
DETECTORS = ("auto", "structure", "steps")
#: Seeds of each scenario, and how many random variants (the property tests' draws).
SEEDS = (0, 1, 2)
VARIANTS = 40


def _from_checkout(path: Path) -> Path:
    """``path`` named relative to the checkout (the commands run in it: ``tests/data/...``,
    ``../shared/traces/...``), so that the outputs, which name their input, are the same from a
    checkout at any place (a git worktree, the main checkout)."""
    return Path(os.path.relpath(path, ROOT))


def _corpus(scratch: Path) -> dict[str, Path]:
    inputs: dict[str, Path] = {}
    if SHARED.is_dir():
        for path in sorted(SHARED.rglob("*.json*")):
            inputs[f"shared/{path.relative_to(SHARED)}"] = _from_checkout(path)
    for path in sorted((ROOT / "tests" / "data").rglob("*.json.gz")):
        inputs[f"data/{path.relative_to(ROOT / 'tests' / 'data')}"] = _from_checkout(path)
    for name in SCENARIOS:
        for seed in SEEDS:
            path = scratch / f"{name}-{seed}.json"
            write_trace(generate(name, seed), str(path))
            inputs[f"generated/{name}-{seed}"] = path
    for seed in range(VARIANTS):
        path = scratch / f"variant-{seed}.json"
        write_trace(random_variant(seed).generate(), str(path))
        inputs[f"variant/{seed}"] = path
    return inputs


#: Files a split folder holds that are not output: the marker of the files the tool wrote
#: (``output.FOLDER_MARKER``; new with issue 22, it lists them and says nothing of the trace).
NOT_OUTPUT = {".stream-split"}


def _digest_folder(folder: Path, scratch: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in folder.iterdir() if p.name not in NOT_OUTPUT):
        data = path.read_bytes()
        if path.name.endswith(".gz"):
            data = gzip.decompress(data)
        h.update(path.name.encode() + b"\0" + hashlib.sha256(_portable(data, scratch)).digest())
    return h.hexdigest()


def _portable(data: bytes, scratch: Path) -> bytes:
    """``data`` with the scratch folder's path (a new one each run, named in manifests) made
    the same word every run."""
    return data.replace(str(scratch).encode(), b"<scratch>")


COMMAND = [sys.executable, "-m", "stream_split.cli"]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


def _run(argv: list[str], scratch: Path) -> str:
    done = subprocess.run([*COMMAND, *argv], capture_output=True, timeout=600, env=ENV,
                          cwd=ROOT)
    h = hashlib.sha256(_portable(done.stdout, scratch))
    h.update(f"rc={done.returncode}".encode())
    return h.hexdigest()


def _fingerprint(name: str, path: Path, scratch: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for detector in DETECTORS:
        common = [str(path), "--detector", detector, "--quiet"]
        out[f"boundaries/{detector}"] = _run(["boundaries", *common], scratch)
        out[f"protobuf/{detector}"] = _run(["boundaries", *common, "--format", "protobuf"], scratch)
        out[f"tag/{detector}"] = _run(["tag", *common], scratch)
        out[f"explain/{detector}"] = _run(["explain", *common, "--json"], scratch)
        folder = scratch / "split" / name.replace("/", "_") / detector
        rc = subprocess.run([*COMMAND, "split", *common, "-o", str(folder)],
                            capture_output=True, timeout=600, env=ENV, cwd=ROOT).returncode
        out[f"split/{detector}"] = f"rc={rc} " + (_digest_folder(folder, scratch) if folder.is_dir() else "-")
    return out


def record(target: str, only: list[str] | None = None) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        inputs = _corpus(scratch)
        if only:
            inputs = {k: v for k, v in inputs.items() if k.startswith(tuple(only))}
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            results = dict(zip(inputs, pool.map(
                lambda item: _fingerprint(item[0], item[1], scratch), inputs.items())))
    Path(target).write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    print(f"{len(results)} inputs, {sum(map(len, results.values()))} outputs -> {target}")
    return 0


def compare(before: str, after: str) -> int:
    a = json.loads(Path(before).read_text())
    b = json.loads(Path(after).read_text())
    differ = [f"{name} {key}" for name in sorted(set(a) | set(b))
              for key in sorted(set(a.get(name, {})) | set(b.get(name, {})))
              if a.get(name, {}).get(key) != b.get(name, {}).get(key)]
    for line in differ:
        print("differs:", line)
    total = sum(map(len, a.values()))
    print(f"{len(a)} inputs, {total} outputs compared; {len(differ)} differ")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("record")
    p.add_argument("target")
    p.add_argument("--only", nargs="+", metavar="PREFIX",
                   help="only the inputs whose names start so (shared/, data/, generated/, variant/)")
    p = sub.add_parser("compare")
    p.add_argument("before")
    p.add_argument("after")
    args = parser.parse_args(argv)
    if args.command == "record":
        return record(args.target, args.only)
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
