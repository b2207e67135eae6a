"""A boundary's window added in one call (``_native.add_window``, where built: the common case
of ``owners.Windows.add``, once a boundary) leaves the windows as that method leaves them,
its fallback: the same starts, latest start, cached window, descents and step openers."""
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from stream_split import native
from stream_split.core import owners
from stream_split.core.owners import Windows

needs_native = pytest.mark.skipif(native.NATIVE is None, reason="stream_split._native is not "
                                  "built (or turned off): only the fallback")


def _state(windows: Windows) -> str:
    """Everything ``Windows.add`` may change, as text (a gap's NaN compares so)."""
    openers = windows.openers
    floors = None if openers._floors is None else list(openers._floors)
    return repr((windows.starts.__class__, list(windows.starts), windows.latest_start,
                 windows.cached_lo, windows.cached_hi, windows.cached_owner, windows._descents,
                 floors, openers._runs, openers._run_starts, openers.any,
                 openers.run_thread is owners._NO_RUN or openers.run_thread))


def _added(adds: list, add) -> tuple:
    """The indices ``add`` gives to each of ``adds`` (``(ts, opens_after, thread)``) on new
    windows, and their state after each."""
    windows = Windows()
    return [(add(windows, *one), _state(windows)) for one in adds]


_TIMES = st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.integers(-10 ** 6, 10 ** 6),
                   st.sampled_from([2 ** 53, 2 ** 53 + 1, -(2 ** 53) - 1, 2 ** 60]))
_GAPS = st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False),
                  st.just(float("-inf")))
_ADDS = st.lists(st.tuples(_TIMES, _GAPS, st.sampled_from([(1, 1), (1, 2), ("1", "a")])),
                 max_size=40)


@needs_native
@settings(max_examples=300, deadline=None)
@given(adds=_ADDS, rising=st.booleans())
def test_a_window_added_in_one_call_is_added_as_the_method_adds_it(adds, rising):
    if rising:  # (mostly the common case: each start after the one before)
        adds = [(float(at) + one[0] % 7 if isinstance(one[0], float) else at * 3, *one[1:])
                for at, one in enumerate(adds)]
    assert _added(adds, native.NATIVE.add_window) == _added(adds, Windows.add)


@needs_native
@pytest.mark.parametrize("gap", [None, 0.5])
def test_a_loop_of_boundaries_adds_each_window_after_the_first_in_one_call(gap, monkeypatch):
    calls = []

    def counted(self, *args):
        calls.append(args)
        return added(self, *args)
    added = Windows.add
    monkeypatch.setattr(Windows, "add", counted)
    windows = Windows()
    for k in range(100):
        assert owners.add_window(windows, k * 2 if k % 2 else k * 2.0,
                                 None if gap is None else k * 2 - gap, (1, 1)) == k
    assert len(calls) == 1  # the first (no start before it), by the method
    assert windows.cached_owner == 98 and windows.latest_start == 198.0


_STATE_IN_A_FRESH_PROCESS = """
from stream_split.core import owners
windows = owners.Windows()
for k in range(50):
    owners.add_window(windows, float(k), None if k < 10 else k - 0.5, (1, 1 + k // 20))
print(owners.add_window is owners.Windows.add, list(windows.starts), windows.latest_start,
      windows.cached_lo, windows.cached_hi, windows.cached_owner,
      list(windows.openers._floors), windows.openers._runs, windows.openers._run_starts)
"""


@needs_native
def test_windows_are_added_alike_in_a_fresh_process_either_way():
    outs = [subprocess.run([sys.executable, "-c", _STATE_IN_A_FRESH_PROCESS],
                           env={**os.environ, native.NO_NATIVE_ENV: off}, capture_output=True,
                           text=True, check=True).stdout.split(" ", 1) for off in ("", "1")]
    assert [out[0] for out in outs] == ["False", "True"]  # the call, then the method
    assert outs[0][1] == outs[1][1]
