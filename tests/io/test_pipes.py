"""``stream-split`` in real shell pipes: stdin, a reader that goes away, a writer that dies."""
from __future__ import annotations

import gzip
import json
import os
import queue
import re
import shlex
import shutil
import subprocess
import sys
import threading

import pytest

from stream_split.testing.generate import generate, render

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("zcat") is None,
                                reason="needs bash and zcat")

CLI = f"{shlex.quote(sys.executable)} -m stream_split.cli"


def _sh(command: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("pipes")
    text = render(generate("training", 0, steps=12), "object").encode()
    (d / "t.json").write_bytes(text)
    (d / "t.json.gz").write_bytes(gzip.compress(text, compresslevel=6))
    ref = subprocess.run(f"{CLI} boundaries --detector steps t.json", shell=True, cwd=d,
                         capture_output=True, timeout=60)
    assert ref.returncode == 0, ref.stderr.decode()
    return d, text, ref.stdout


def _records(stdout: bytes) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_cat_into_boundaries(traces):
    d, _, ref = traces
    done = subprocess.run(f"cat t.json | {CLI} boundaries --detector steps -", shell=True, cwd=d,
                          capture_output=True, timeout=60)
    assert done.returncode == 0 and done.stderr == b"", done.stderr.decode()
    assert _records(done.stdout) == _records(ref) and len(_records(ref)) == 24


def test_gzip_is_detected_from_the_bytes_on_stdin(traces):
    d, _, ref = traces
    shutil.copy(d / "t.json.gz", d / "no-suffix.bin")
    done = _sh(f"{CLI} boundaries --detector steps - < no-suffix.bin", d)
    assert done.returncode == 0, done.stderr.decode()
    assert _records(done.stdout) == _records(ref)
    piped = _sh(f"cat no-suffix.bin | {CLI} boundaries --detector steps -", d)
    assert piped.returncode == 0 and _records(piped.stdout) == _records(ref)


def test_head_closes_the_pipe_quietly(traces):
    d, _, _ = traces
    # tag writes ~1 MB: far more than the pipe holds (64 KiB), so it meets the closed pipe.
    done = _sh(f"zcat t.json.gz | {CLI} tag --detector steps - 2>tag.err | head -n 5;"
               " echo \"status=${PIPESTATUS[1]}\" >&2", d)
    lines = done.stdout.splitlines()
    assert len(lines) == 5 and all("event" in json.loads(line) for line in lines)
    assert done.stderr.strip() == b"status=0"
    assert (d / "tag.err").read_bytes() == b""


@pytest.mark.parametrize("cut", [0.35, 0.999])
def test_writer_killed_mid_event(traces, cut):
    d, text, _ = traces
    n = int(len(text) * cut)
    while text[n - 1:n] in b"\n,":  # make sure the stream stops inside an event
        n -= 1
    out = f"out-{cut}"
    done = _sh(f"head -c {n} t.json | {CLI} split --detector steps - -o {out}", d)
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr and b"incomplete input" in done.stderr
    manifest = json.loads((d / out / "manifest.json").read_text())
    assert manifest["complete"] is False and manifest["stop_reason"]
    assert manifest["counts"]["conserved"]
    assert manifest["iterations"]
    for entry in manifest["iterations"] + [manifest["outside"]]:
        if entry["file"]:
            with gzip.open(os.path.join(d, out, os.path.basename(entry["file"]))) as f:
                piece = json.load(f)
            assert sum(e.get("ph") != "M" for e in piece["traceEvents"]) == entry["events"]


WRITER = r'''
import sys, zlib
data = open(sys.argv[1], "rb").read()
cuts = [int(c) for c in sys.argv[2].split(",")] + [len(data)]
z = zlib.compressobj(6, zlib.DEFLATED, 31)
out, start = sys.stdout.buffer, 0
for i, end in enumerate(cuts):
    last = i == len(cuts) - 1
    out.write(z.compress(data[start:end]) + z.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH))
    out.flush()
    start = end
    print("wrote", i, file=sys.stderr, flush=True)
    if not last and sys.stdin.readline().strip() != "next":
        break
'''


def test_live_gzip_pipe(traces, tmp_path):
    """`writer | stream-split boundaries -`: each boundary before the writer goes on."""
    d, text, ref = traces
    ends = [m.end() for m in re.finditer(rb'[^\n]*"ProfilerStep#\d+"[^\n]*\n', text)
            if b'"user_annotation"' in m.group()]
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(d / "t.json"),
                               ",".join(map(str, ends))],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reader = subprocess.Popen(shlex.split(CLI) + ["boundaries", "--detector", "steps", "-"],
                              stdin=writer.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    writer.stdout.close()  # the reader holds the pipe now
    records = queue.Queue()
    threading.Thread(target=lambda: [records.put(x) for x in iter(reader.stdout.readline, b"")]
                     + [records.put(b"")], daemon=True).start()
    got = []

    def next_record(what):
        try:
            return records.get(timeout=15)
        except queue.Empty:
            raise AssertionError(f"no record within 15 s while waiting for {what}") from None
    try:
        for step in range(len(ends)):
            assert writer.stderr.readline() == f"wrote {step}\n".encode()
            got.append(next_record(f"boundary {step}"))  # the writer is blocked: it must come now
            assert json.loads(got[-1]) == {**json.loads(got[-1]), "type": "boundary",
                                           "index": step}
            writer.stdin.write(b"next\n")
            writer.stdin.flush()
        while (line := next_record("the end")) != b"":
            got.append(line)
        assert reader.wait(15) == 0 and writer.wait(15) == 0
    finally:
        for p in (writer, reader):
            if p.poll() is None:
                p.kill()
                p.wait()
        for stream in (writer.stdin, writer.stderr, reader.stdout, reader.stderr):
            stream.close()
    assert _records(b"".join(got)) == _records(ref)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_follow_a_named_pipe(traces):
    """``--follow FIFO`` reads until the writer closes it (no idle timeout involved)."""
    d, _, ref = traces
    fifo = d / "trace.fifo"
    os.mkfifo(fifo)
    try:
        done = _sh(f"cat t.json > trace.fifo & {CLI} boundaries --detector steps"
                   " --follow trace.fifo --idle-timeout 60; wait", d)
    finally:
        fifo.unlink()
    assert done.returncode == 0, done.stderr.decode()
    assert _records(done.stdout) == _records(ref)


def test_head_on_summary_ends_quietly(traces, tmp_path):
    """rich answers a closed pipe with exit status 1; the command ends quietly (0)."""
    d, _, _ = traces
    folder = tmp_path / "split"
    done = _sh(f"{CLI} split --detector steps t.json -q -o {shlex.quote(str(folder))}", d)
    assert done.returncode == 0, done.stderr.decode()
    manifest = json.loads((folder / "manifest.json").read_text())
    # ~1,000 rows: far more than the pipe holds, so the table meets the closed pipe.
    manifest["iterations"] = manifest["iterations"] * 100
    (folder / "manifest.json").write_text(json.dumps(manifest))
    done = _sh(f"{CLI} summary {shlex.quote(str(folder))} 2>summary.err | head -n 1;"
               " echo \"status=${PIPESTATUS[0]}\" >&2", d)
    assert len(done.stdout.splitlines()) == 1
    assert done.stderr.strip() == b"status=0"
    assert (d / "summary.err").read_bytes() == b""
