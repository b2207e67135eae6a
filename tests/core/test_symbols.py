"""The symbol table of op names (``skeleton.Symbols``): each name's family is the name with
every run of digits folded into ``N``, however the fold is found."""
import re

from hypothesis import given, settings, strategies as st

from stream_split.core.detect.skeleton import Symbols

_RUNS = re.compile(r"\d+")
_NAMES = st.text(alphabet="ab_:.N0123456789١٢３", max_size=12)


@settings(max_examples=1000, deadline=None)
@given(st.lists(_NAMES, max_size=20))
def test_every_name_is_of_its_family(names):
    symbols = Symbols()
    for name in names:
        assert symbols.names[symbols.of(name)] == _RUNS.sub("N", name)
    for name in names:  # found again, as the table holds it or folded again
        assert symbols.names[symbols.of(name)] == _RUNS.sub("N", name)
