"""The native framing (``stream_split._framing``, issue 24) gives what the numpy passes give
(``decode.Framing``'s fallback) on any bytes, valid JSON or not, from any state, cut anywhere;
and CI builds it (``.ci/run`` sets ``STREAM_SPLIT_REQUIRE_NATIVE``)."""
import gzip
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import stream_split
import stream_split.decode as decode_module
from conftest import framing, run_cli
from stream_split.cli import sample_trace_path
from stream_split.decode import Framing

NATIVE_BUILT = decode_module._built_frame is not None
needs_native = pytest.mark.skipif(not NATIVE_BUILT, reason="stream_split._framing is not built "
                                  "here (no C compiler at install): the numpy framing is used")


def test_ci_builds_the_native_framing():
    if not os.environ.get("STREAM_SPLIT_REQUIRE_NATIVE"):
        pytest.skip("only where the native framing is required (.ci/run)")
    assert NATIVE_BUILT and decode_module.FRAMING == "native"


def both(buf, start, state):
    """(native, numpy) framings of ``buf[start:]`` from ``state``."""
    native = Framing(buf, start, state)
    with framing("numpy"):
        numpy = Framing(buf, start, state)
    return native, numpy


def assert_same(native, numpy):
    assert native.brackets.dtype == numpy.brackets.dtype == np.int64
    assert native.depth.dtype == numpy.depth.dtype == np.int32
    assert native.brackets.tolist() == numpy.brackets.tolist()
    assert native.depth.tolist() == numpy.depth.tolist()
    assert native.end_state == numpy.end_state


# Bytes that matter to framing, and filler: runs of backslashes, quotes, brackets, pipes (which
# the numpy passes find with the brackets and drop), across the 64-byte blocks the native scan
# reads at once.
_BYTES = st.lists(st.sampled_from([b"{", b"}", b"[", b"]", b'"', b"\\", b"|", b"a", b" ", b",",
                                   b":", b"\xc3\xa9", b"a" * 70, b"\\" * 63, b'"' * 3]),
                  max_size=60).map(b"".join)


@needs_native
@settings(max_examples=int(os.environ.get("FRAMING_EXAMPLES", 2000)), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(buf=_BYTES, start=st.integers(0, 4000), in_string=st.booleans(),
       depth=st.integers(-5, 5), escaped=st.booleans())
def test_native_framing_equals_numpy_on_any_bytes_from_any_state(buf, start, in_string, depth,
                                                                  escaped):
    assert_same(*both(buf, min(start, len(buf)), (in_string, depth, escaped)))


@needs_native
@pytest.mark.parametrize("piece", [1, 63, 64, 65, 4096, 1 << 20])
def test_native_framing_equals_numpy_across_the_pieces_of_a_real_trace(piece):
    with open(sample_trace_path(), "rb") as f:
        text = gzip.decompress(f.read())
    text = text.replace(b'"name": "', b'"name": "\\"{[\\\\', 200)  # escapes, as some traces have
    native_state = numpy_state = (False, 0, False)
    stop = len(text) if piece >= 64 else 300_000  # (a byte at a time: the first 300 kB)
    for at in range(0, min(stop, len(text)), piece):
        chunk = text[at:at + piece]
        native = Framing(chunk, 0, native_state)
        with framing("numpy"):
            numpy = Framing(chunk, 0, numpy_state)
        assert_same(native, numpy)
        native_state, numpy_state = native.end_state, numpy.end_state
    if stop >= len(text):
        assert native_state[:2] == (False, 0)  # the document framed to its end


def test_version_names_the_framing_in_use():
    assert run_cli("--version").stdout.decode().strip() == \
        f"stream-split {stream_split.__version__} (framing: {decode_module.FRAMING})"
    no_native = run_cli("--version", env_update={decode_module.NO_NATIVE_ENV: "1"})
    assert no_native.stdout.decode().strip().endswith("(framing: numpy)")
