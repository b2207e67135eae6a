"""``STREAM_SPLIT_NO_NATIVE`` turns every native part off at once (``stream_split.native``:
the decoder's passes, the detector's op and name folding, the pieces of tiny iterations, the
records made and paged), and
a split on the Python fallbacks writes what the native parts write."""
import gzip
import os
import subprocess
import sys

import pytest

from conftest import run_cli
from stream_split import native
from stream_split.testing.attacks import numbered_names, one_op_iterations, random_names
from stream_split.testing.generate import generate, write_trace

needs_native = pytest.mark.skipif(native.BUILT is None, reason="stream_split._native is not "
                                  "built here (no C compiler at install): only the fallbacks")

_PARTS_IN_USE = """
import stream_split.core.detect.search as search, stream_split.core.detect.skeleton as skeleton
import stream_split.decode as decode, stream_split.native as native
import stream_split.core.records as records
print(native.NATIVE is None, decode._native is None, skeleton.Node is skeleton.PyNode,
      skeleton._family is skeleton.family, search._ascii_without is search.ascii_without,
      records.IterationRecord.unpack_page is records._records_of)
"""


@pytest.mark.parametrize("value, off", [("1", True), ("yes", True), ("0", False), ("", False)])
def test_the_switch_turns_every_native_part_off_together(value, off):
    env = {**os.environ, native.NO_NATIVE_ENV: value}
    out = subprocess.run([sys.executable, "-c", _PARTS_IN_USE], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == [str(off or native.BUILT is None)] * 6  # not built: always the fallbacks


def _pieces(folder):
    """Each file of a split's folder, its text (a piece decompressed), by name."""
    return {path.name: gzip.decompress(path.read_bytes()) if path.suffix == ".gz"
            else path.read_bytes() for path in sorted(folder.iterdir())}


@needs_native
@pytest.mark.parametrize("make, size", [(one_op_iterations, 300), (random_names, 3000),
                                        (numbered_names, 3000)],
                         ids=["one_op_iterations", "random_names", "numbered_names"])
def test_a_split_on_the_fallbacks_writes_what_the_native_parts_write(tmp_path, make, size):
    trace = tmp_path / "trace.json"
    make(str(trace), size)
    run_cli("split", trace, "-o", tmp_path / "native")
    run_cli("split", trace, "-o", tmp_path / "fallbacks", env_update={native.NO_NATIVE_ENV: "1"})
    native_pieces = _pieces(tmp_path / "native")
    assert len(native_pieces) > 2  # a manifest, the outside piece and iterations
    assert _pieces(tmp_path / "fallbacks") == native_pieces


@needs_native
@pytest.mark.parametrize("scenario", ["training", "serving", "idle_steps", "dynamic_shapes"])
def test_a_generated_gpu_trace_splits_alike_in_a_fresh_process_either_way(tmp_path, scenario):
    """Kernels, copies and launches fed through the feed lane's C (GPU work counted into its
    breakdown, ops held, launches awaited) by a process that has run nothing else first: a C
    name set up only by another entry point would show here, not in a test process that
    called that entry point before."""
    trace = tmp_path / "trace.json"
    write_trace(generate(scenario, 3), str(trace))
    run_cli("split", trace, "-o", tmp_path / "native", "--detector", "auto")
    run_cli("split", trace, "-o", tmp_path / "fallbacks", "--detector", "auto",
            env_update={native.NO_NATIVE_ENV: "1"})
    native_pieces = _pieces(tmp_path / "native")
    assert len(native_pieces) > 4
    assert _pieces(tmp_path / "fallbacks") == native_pieces
