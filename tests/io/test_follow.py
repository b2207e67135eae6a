"""``--follow``: a real writer process appends a trace while ``stream-split`` reads it.

The writer and the reader are separate processes, as in real use. They are coordinated by a
handshake, not by sleeps: the writer writes one chunk, says so, and waits; the test waits (with a
generous time limit) until the boundary that chunk makes decidable is on the reader's stdout,
and only then lets the writer go on. So a passing test proves that each boundary reached the
reader's stdout before the writer wrote its next byte.
"""
from __future__ import annotations

import gzip
import json
import os
import queue
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import zlib

import pytest
from hypothesis import example, given, settings, strategies as st

from stream_split.decode import TraceDecoder
from stream_split.follow import FollowedFile
from stream_split.testing.generate import generate, render
from stream_split.read import TraceInputError, TraceReader, enlarge_pipe

PY = sys.executable
CLI = [PY, "-m", "stream_split.cli"]
WAIT = 15.0          # upper limit for anything that should take milliseconds
IDLE = "1.5"  # --idle-timeout: the only end of JSON Lines and unterminated arrays; it must
#               outlast one handshake (milliseconds) on a loaded machine
SNIFF_BYTES = 64 * 1024 + 4096  # TraceReader peeks 64 KiB before it yields anything (see below)

WRITER = textwrap.dedent(r'''
    import os, sys, zlib
    src, dst, cuts, compress, rename_to, rename_after = sys.argv[1:7]
    data = open(src, "rb").read()
    cuts = [int(c) for c in cuts.split(",")] + [len(data)]
    line = sys.stdin.readline()             # "go": the reader has been started
    f = open(dst, "wb")
    z = zlib.compressobj(6, zlib.DEFLATED, 31) if compress == "1" else None
    start = 0
    for i, end in enumerate(cuts):
        piece = data[start:end]
        start = end
        last = i == len(cuts) - 1
        if z is not None:
            piece = z.compress(piece) + z.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)
        f.write(piece)
        f.flush()
        if rename_to != "-" and i == int(rename_after):
            os.rename(dst, rename_to)       # as Kineto does with <name>.tmp; f stays open
        print("wrote", i, flush=True)
        if not last and sys.stdin.readline().strip() != "next":
            break
    f.close()
    print("done", flush=True)
''')


def _run(args, **kw):
    return subprocess.run(CLI + args, capture_output=True, timeout=60, **kw)


class _Lines:
    """Lines of a pipe, read by a thread, handed out with a time limit."""

    def __init__(self, stream):
        self._q: queue.Queue = queue.Queue()
        self.seen: list[bytes] = []
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream):
        for line in iter(stream.readline, b""):
            self._q.put(line)
        self._q.put(None)

    def next(self, what: str) -> bytes | None:
        try:
            line = self._q.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError(f"nothing on the pipe within {WAIT} s while waiting for {what}; "
                                 f"seen so far: {self.seen[-3:]}") from None
        if line is not None:
            self.seen.append(line)
        return line


def _step_line_ends(text: bytes) -> list[int]:
    """Offset just after the line of each CPU ``ProfilerStep#k`` annotation, in order."""
    return [m.end() for m in re.finditer(rb'[^\n]*"ProfilerStep#\d+"[^\n]*\n', text)
            if b'"user_annotation"' in m.group()]


def _cuts(text: bytes, head_min: int) -> list[tuple[int, int]]:
    """(offset, step) pairs: chunk i ends just after ProfilerStep#step's line. The first chunk
    reaches ``head_min`` bytes; the last one (not listed) holds the other threads and the GPU."""
    ends = _step_line_ends(text)
    first = next(k for k, end in enumerate(ends) if end >= head_min)
    return [(ends[k], k) for k in range(first, len(ends))]


def _records(stdout: bytes) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _pieces(out_dir) -> dict:
    found = {}
    for name in sorted(os.listdir(out_dir)):
        path = os.path.join(out_dir, name)
        if name.endswith(".json.gz"):
            with gzip.open(path, "rb") as f:
                found[name] = json.load(f)
        elif name == "manifest.json":
            with open(path) as f:
                found[name] = json.load(f)
    return found


def _follow_live(tmp_path, form: str, *, compress: bool = False, head_min: int = SNIFF_BYTES,
                 dst_name: str | None = None, rename: bool = False, split_too: bool = True):
    """Write a trace chunk by chunk from a writer process while ``boundaries --follow`` (and
    ``split --follow``) read it; check every boundary arrives before the next chunk; return
    (live path, boundaries stdout, split output dir or None)."""
    gen = generate("training", 0, steps=16)
    if form == "array-open":
        text = render(gen, "array", close_array=False).encode()
    else:
        text = render(gen, form).encode()
    src = tmp_path / "source.json"
    src.write_bytes(text)
    suffix = ".jsonl" if form == "jsonl" else ".json.gz" if compress else ".json"
    live = tmp_path / (dst_name or "live" + suffix)
    final = tmp_path / ("final" + suffix)
    cuts = _cuts(text, head_min)
    writer = subprocess.Popen(
        [PY, "-c", WRITER, str(src), str(live), ",".join(str(c) for c, _ in cuts),
         "1" if compress else "0", str(final) if rename else "-", "1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    common = ["--follow", str(live), "--detector", "steps", "--idle-timeout", IDLE]
    reader = subprocess.Popen(CLI + ["boundaries"] + common, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    out_dir = tmp_path / "split-follow"
    splitter = (subprocess.Popen(CLI + ["split", "-o", str(out_dir)] + common,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                if split_too else None)
    try:
        records, written = _Lines(reader.stdout), _Lines(writer.stdout)
        # The readers start before the file exists: they wait for it to appear.
        writer.stdin.write(b"go\n")
        writer.stdin.flush()
        boundaries_seen = -1
        for i, (_, step) in enumerate(cuts):
            assert written.next(f"chunk {i}") == f"wrote {i}\n".encode()
            while boundaries_seen < step:  # the writer is blocked: this must come now
                line = records.next(f"the boundary of ProfilerStep#{step} (chunk {i})")
                assert line is not None, reader.stderr.read().decode()
                record = json.loads(line)
                assert record["type"] == "boundary", record
                boundaries_seen = record["index"]
            writer.stdin.write(b"next\n")
            writer.stdin.flush()
        assert written.next("the last chunk") == f"wrote {len(cuts)}\n".encode()
        assert written.next("the writer's end") == b"done\n"
        assert writer.wait(WAIT) == 0
        rest = []
        while (line := records.next("the end of the records")) is not None:
            rest.append(line)
        assert reader.wait(WAIT) == 0, reader.stderr.read().decode()
        if splitter is not None:
            assert splitter.wait(WAIT) == 0, splitter.stderr.read().decode()
    finally:
        for p in (writer, reader, splitter):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        for p in (writer, reader, splitter):
            for stream in (p.stdin, p.stdout, p.stderr) if p is not None else ():
                if stream is not None:
                    stream.close()
    stdout = b"".join(records.seen)
    return (final if rename else live), stdout, (out_dir if split_too else None)


def _check_same_as_finished(tmp_path, path, stdout, out_dir):
    ref_dir = tmp_path / "split-finished"
    runs = [subprocess.Popen(CLI + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for args in (["boundaries", str(path), "--detector", "steps"],
                         ["split", str(path), "-o", str(ref_dir), "--detector", "steps"])
            [: 1 if out_dir is None else 2]]
    (ref_out, ref_err), *_ = [p.communicate(timeout=60) for p in runs]
    assert all(p.returncode == 0 for p in runs), ref_err.decode()
    assert _records(stdout) == _records(ref_out)
    assert sum(r["type"] == "boundary" for r in _records(stdout)) == 16
    if out_dir is not None:
        followed, finished = _pieces(out_dir), _pieces(ref_dir)
        assert followed["manifest.json"].pop("input") == str(path)
        finished["manifest.json"].pop("input")
        assert followed == finished
        assert followed["manifest.json"]["counts"]["conserved"]


@pytest.mark.parametrize("form, compress", [
    ("object", False), ("array-open", False), ("jsonl", False), ("object", True)],
    ids=["object", "array-without-bracket", "jsonl", "object-json-gz"])
def test_boundaries_arrive_while_the_writer_waits(tmp_path, form, compress):
    live, stdout, out_dir = _follow_live(tmp_path, form, compress=compress)
    _check_same_as_finished(tmp_path, live, stdout, out_dir)
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert manifest["complete"] is (form != "array-open")


def test_tmp_file_renamed_while_read(tmp_path):
    """Kineto writes <name>.tmp and renames it; the open descriptor keeps reading."""
    live, stdout, out_dir = _follow_live(tmp_path, "object", dst_name="trace.json.tmp",
                                         rename=True, split_too=False)
    assert not (tmp_path / "trace.json.tmp").exists() and live.exists()
    _check_same_as_finished(tmp_path, live, stdout, None)


def test_first_boundary_of_a_small_head(tmp_path):
    """With a head under 64 KiB, the first boundary must come before the writer goes on."""
    live, stdout, _ = _follow_live(tmp_path, "object", head_min=0, split_too=False)
    _check_same_as_finished(tmp_path, live, stdout, None)


def test_follow_waits_for_the_file_then_gives_up(tmp_path):
    t = time.monotonic()
    done = _run(["boundaries", "--follow", str(tmp_path / "never.json"), "--idle-timeout", "0.3"])
    assert done.returncode == 2
    assert time.monotonic() - t >= 0.3
    err = done.stderr.decode().strip()
    assert err.startswith("stream-split: error: no such file") and "\n" not in err


def test_final_name_follows_the_tmp_file(tmp_path):
    """``--follow trace.json`` while Kineto still writes ``trace.json.tmp``: the .tmp is read."""
    text = render(generate("training", 0, steps=4), "object").encode()
    (tmp_path / "trace.json.tmp").write_bytes(text)
    (tmp_path / "ref.json").write_bytes(text)
    followed = _run(["boundaries", "--follow", str(tmp_path / "trace.json"),
                     "--detector", "steps", "--idle-timeout", "30"])
    ref = _run(["boundaries", str(tmp_path / "ref.json"), "--detector", "steps"])
    assert followed.returncode == 0, followed.stderr.decode()
    assert _records(followed.stdout) == _records(ref.stdout) != []


def _read_position(pid: int, path: str) -> int | None:
    """Where process ``pid`` is in its open ``path`` (Linux /proc), or None."""
    fd_dir = f"/proc/{pid}/fd"
    try:
        for fd in os.listdir(fd_dir):
            try:
                if os.readlink(os.path.join(fd_dir, fd)) == path:
                    with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                        return int(f.readline().split()[1])
            except OSError:
                continue
    except OSError:
        return None
    return None


@pytest.mark.skipif(not os.path.isdir("/proc/self/fdinfo"), reason="needs Linux /proc")
def test_sigterm_during_split_follow_leaves_a_valid_manifest(tmp_path):
    gen = generate("training", 0, steps=40)
    text = render(gen, "object").encode()
    cut = _step_line_ends(text)[-1]  # the writer "hangs" in the last step
    # TraceReader's constructor reads at most 256 KiB; having read more, it is in drive().
    assert cut > 300_000
    path = tmp_path / "live.json"
    path.write_bytes(text[:cut])
    out_dir = tmp_path / "out"
    proc = subprocess.Popen(CLI + ["split", "--follow", str(path), "-o", str(out_dir),
                                   "--detector", "steps", "--idle-timeout", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + WAIT
        # Handshake: it has read every byte there is (and so waits for more).
        while _read_position(proc.pid, str(path)) != cut:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "split --follow did not read the file"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        # cli: drive() keeps what was decided; the command ends with 128 + SIGTERM
        assert proc.wait(WAIT) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read().decode()
    proc.stdout.close(), proc.stderr.close()
    assert "Traceback" not in err and "interrupted" in err, err
    pieces = _pieces(out_dir)
    manifest = pieces["manifest.json"]
    assert manifest["complete"] is False and "interrupted" in manifest["stop_reason"]
    assert manifest["counts"]["conserved"]
    assert len(manifest["iterations"]) >= 1
    for it in manifest["iterations"] + [manifest["outside"]]:
        if it["file"]:
            piece = pieces[os.path.basename(it["file"])]
            assert isinstance(piece["traceEvents"], list)
            assert sum(e.get("ph") != "M" for e in piece["traceEvents"]) == it["events"]


# -- FollowedFile in-process, on real files ------------------------------------------------------

def _drain(f: FollowedFile, n: int = 4096) -> bytes:
    out = []
    while chunk := f.read(n):
        out.append(chunk)
    return b"".join(out)


def _read_followed(path, idle_timeout=60.0):
    """All events of a followed file through TraceReader; (events, reader, the file)."""
    followed = FollowedFile(str(path), idle_timeout=idle_timeout)
    with TraceReader(followed) as reader:
        events = list(reader)
    return events, reader, followed


def test_document_end_needs_no_idle_timeout(tmp_path):
    text = render(generate("training", 0, steps=3), "object").encode()
    files = [("t.json", text), ("t.json.gz", gzip.compress(text))]
    try:
        import zstandard
        files.append(("t.json.zst", zstandard.ZstdCompressor().compress(text)))
    except ImportError:
        pass
    for name, data in files:
        (tmp_path / name).write_bytes(data)
        t = time.monotonic()
        events, reader, followed = _read_followed(tmp_path / name)
        assert followed.end_reason == "document" and reader.complete
        assert len(events) == len(json.loads(text)["traceEvents"])
        assert time.monotonic() - t < WAIT


def test_gzip_jsonl_ends_with_its_stream(tmp_path):
    text = render(generate("training", 0, steps=2), "jsonl").encode()
    # two members, as `cat a.gz b.gz` makes
    (tmp_path / "t.jsonl.gz").write_bytes(gzip.compress(text[:1000]) + gzip.compress(text[1000:]))
    events, reader, followed = _read_followed(tmp_path / "t.jsonl.gz")
    assert reader.form == "jsonl" and followed.end_reason == "stream end" and reader.complete
    assert len(events) == text.count(b"\n")


def test_cut_gzip_ends_idle_and_truncated(tmp_path):
    text = render(generate("training", 0, steps=2), "jsonl").encode()
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    (tmp_path / "t.gz").write_bytes(z.compress(text) + z.flush(zlib.Z_SYNC_FLUSH))
    events, reader, followed = _read_followed(tmp_path / "t.gz", idle_timeout=0.2)
    assert followed.end_reason == "idle"
    assert len(events) == text.count(b"\n") and reader.complete is False
    assert "compressed stream ended" in reader.stop_reason


def test_corrupt_gzip_is_a_one_line_error(tmp_path):
    data = bytearray(gzip.compress(render(generate("training", 0, steps=2), "object").encode()))
    data[2] = 9  # compression method: not deflate
    (tmp_path / "bad.json.gz").write_bytes(bytes(data))
    with pytest.raises(TraceInputError, match="corrupt gzip stream"):
        _read_followed(tmp_path / "bad.json.gz", idle_timeout=1)
    done = _run(["boundaries", "--follow", str(tmp_path / "bad.json.gz"), "--idle-timeout", "1"])
    err = done.stderr.decode().strip()
    assert done.returncode == 2 and err.startswith("stream-split: error: corrupt gzip")
    assert "\n" not in err


def test_stop_from_another_thread(tmp_path):
    (tmp_path / "open.json").write_bytes(b'[{"ph": "X"},\n')
    f = FollowedFile(str(tmp_path / "open.json"), idle_timeout=60)
    assert f.read(100) == b'[{"ph": "X"},\n'
    threading.Timer(0.1, f.stop).start()
    t = time.monotonic()
    assert f.read(100) == b"" and f.end_reason == "stopped"
    assert time.monotonic() - t < WAIT
    f.close()


def test_enlarge_pipe():
    r, w = os.pipe()
    try:
        size = enlarge_pipe(r)
        if sys.platform.startswith("linux"):
            import fcntl
            assert size is not None and size >= 1 << 20
            assert fcntl.fcntl(w, 1032) == size  # F_GETPIPE_SZ
    finally:
        os.close(r)
        os.close(w)
    with open(__file__, "rb") as f:
        assert enlarge_pipe(f.fileno()) is None  # not a pipe: left alone


# -- the decoder's end of document, on any chunking ----------------------------------------------

_nasty = st.text(alphabet=st.sampled_from(list('ab{}[]"\\,:/ \n\té€')), max_size=12)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | _nasty,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_nasty, inner, max_size=4),
    max_leaves=20)


@settings(max_examples=int(os.environ.get("FOLLOW_EXAMPLES", 80)), deadline=None)
@given(events=st.lists(st.dictionaries(_nasty, _json_values, max_size=4), max_size=5),
       form=st.sampled_from(["object", "array"]), indent=st.sampled_from([None, 1]),
       cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=8))
# A one-line document cut just before its final newline is complete (CI found it).
@example(events=[{}, {}, {}, {"": []}, {"": []}], form="object", indent=None, cuts=[62])
def test_document_end_on_any_chunking(events, form, indent, cuts):
    """The decoder is at rest (a followed file stops waiting) exactly when the last bracket
    of the document has come, whatever the chunking."""
    doc = {"traceEvents": events, "x}": "]\\"} if form == "object" else events
    text = json.dumps(doc, indent=indent, ensure_ascii=False).encode() + b"\n"
    end = len(text.rstrip())  # the final bracket is the last non-blank byte
    decoder = TraceDecoder()
    got = []
    pos = 0
    for cut in sorted({min(c, len(text)) for c in cuts if c > 0} | {len(text)}):
        got += decoder.receive_data(text[pos:cut]).events
        pos = cut
        assert decoder.at_rest is (pos >= end), (text, pos)
    got += decoder.receive_data(b"").events
    assert decoder.form == form and decoder.complete and got == events


@settings(max_examples=50, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=6))
def test_json_lines_never_at_rest_while_plain(cuts):
    text = render(generate("single_forward", 0, layers=1), "jsonl").encode()[:3000]
    decoder = TraceDecoder()
    pos = 0
    for cut in sorted({c for c in cuts if c > 0} | {len(text)}):
        decoder.receive_data(text[pos:cut])
        pos = cut
        assert not decoder.at_rest
    assert decoder.form == "jsonl"
