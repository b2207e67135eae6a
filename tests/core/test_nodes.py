"""The detector's native parts (``stream_split._native``, where it is built) and their Python
fallbacks: the skeleton's op (``skeleton.Node``: the native class holds what the Python one,
``skeleton.PyNode``, holds, made, changed and compared the same way), a name's family
(``skeleton.family``) and the loop markers' first test (``search.ascii_without``)."""
import gc
import re

import pytest
from hypothesis import given, settings, strategies as st

from stream_split.core.detect import search, skeleton
from stream_split.core.detect.skeleton import PyNode
from stream_split.trace_format import LOOP_MARKER_WORDS

_native = skeleton._native
needs_native = pytest.mark.skipif(_native is None, reason="stream_split._native is not built")
_FIELDS = PyNode.__slots__
_RUNS = re.compile(r"\d+")


def test_the_skeleton_uses_the_native_node_where_it_is_built():
    assert skeleton.Node is (PyNode if _native is None else _native.Node)


@needs_native
@pytest.mark.parametrize("args", [(3, 1.5, 2.5, 0), (-1, 0.0, 0.0, 0), (7, 10, 12, 4)])
def test_a_native_node_is_made_as_the_python_one(args):
    native, python = _native.Node(*args), PyNode(*args)
    for field in _FIELDS:
        assert getattr(native, field) == getattr(python, field), field
        assert type(getattr(native, field)) is type(getattr(python, field)), field


@needs_native
def test_a_native_node_has_the_python_ones_fields_and_no_other():
    public = {name for name in dir(_native.Node) if not name.startswith("_")}
    assert public == set(_FIELDS)
    node = _native.Node(1, 0.0, 1.0, 0)
    with pytest.raises(AttributeError):
        node.other = 1  # no __dict__, as __slots__ has none


@needs_native
def test_a_native_node_changes_and_compares_as_the_python_one():
    for cls in (PyNode, _native.Node):
        a, b = cls(1, 0.0, 1.0, 0), cls(1, 0.0, 1.0, 0)
        a.gpu += 2
        a.kids = [b]
        a.opener = [(0.0, 2.0, "frame")]
        assert (a.gpu, a.kids[0] is b, a.opener) == (2, True, [(0.0, 2.0, "frame")])
        assert a != b and a == a and len({a, b, a}) == 2  # identity, as ``object``
        del a.opener
        with pytest.raises(AttributeError):
            a.opener


@needs_native
def test_native_node_arguments_are_checked():
    with pytest.raises(TypeError):
        _native.Node(1, 0.0, 1.0)
    with pytest.raises(TypeError):
        _native.Node(1, 0.0, 1.0, depth=0)


@needs_native
def test_a_cycle_of_native_nodes_is_collected():
    node = _native.Node(1, 0.0, 1.0, 0)
    node.kids = [node]
    del node
    assert gc.collect() >= 2  # the node and its list


# -- the names' passes: a name's family (``skeleton.family``) and the loop markers' first
# test (``search.ascii_without``), native and Python alike

_NAMES = st.text(alphabet="ab_:.NAZ0123456789١٢３ſ", max_size=16)


@needs_native
@settings(max_examples=2000, deadline=None)
@given(_NAMES)
def test_a_names_family_is_the_same_native_or_not(name):
    native, python = _native.family(name), skeleton.family(name)
    assert native == python == _RUNS.sub("N", name)
    assert (native is name) == (python is name) == (_RUNS.search(name) is None)


@needs_native
@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="aAbBzZ_.ſ1", max_size=16),
       st.lists(st.text(alphabet="ab_.", min_size=1, max_size=4), max_size=4))
def test_ascii_without_is_the_same_native_or_not(name, words):
    words = tuple(words)
    assert _native.ascii_without(name, words) == search.ascii_without(name, words)


@needs_native
@pytest.mark.parametrize("name", ["enumerate(DataLoader)#_SingleProcessDataLoaderIter",
                                  "Optimizer.step#SGD.step", "get_BATCH", "op_abcde_N", "ſ_batch"])
def test_ascii_without_the_loop_marker_words(name):
    assert _native.ascii_without(name, LOOP_MARKER_WORDS) == \
        search.ascii_without(name, LOOP_MARKER_WORDS)


# ``skeleton.add_root`` (a main thread's new top-level op, counted) against ``_native.add_root``,
# op by op: the same top level, time, counts (the node that followed a kind seen once, by its
# place), pairs, exactness, marks and answer (``Skeletons.forget_singles`` is due)


def _root_state(state, counts) -> tuple:
    """What ``add_root`` sets, with each node told by its place on the top level."""
    at = {id(node): k for k, node in enumerate(state.roots)}
    seen = {sym: ("node", at[id(v)]) if type(v) is not int else v
            for sym, v in counts._seen.items()}
    return ([n.sym for n in state.roots], state.busy, seen, counts._pairs, counts._last,
            counts.last_count, counts.exact, counts.marked, counts.singles, state.kid_seen)


@needs_native
@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 9), st.booleans(), st.integers(0, 3),
                              st.sampled_from([0.5, 2, 7.25])), max_size=60),
       sift_at=st.integers(0, 6))
def test_a_native_root_is_added_and_counted_as_the_python_one(ops, sift_at):
    states = [skeleton.ThreadSkeleton((1, 1), 10) for _ in range(2)]
    for state in states:
        state.sift_at = sift_at
    for k, (sym, marker, kids, took) in enumerate(ops):
        answers = []
        for state, add, cls in zip(states, (skeleton.add_root, _native.add_root),
                                   (PyNode, _native.Node)):
            state.kid_seen = {"container": kids} if kids else (None if k % 2 else {})
            answers.append(add(state, cls(sym, k, k + took, 0), marker,
                               skeleton._MIN_INSTANCES, skeleton.REPEAT))
        python, native = (_root_state(state, state.seen) for state in states)
        assert native == python and answers[0] is answers[1]
        assert type(native[1]) is type(python[1])  # busy: int + float as Python adds them


@needs_native
def test_native_add_root_arguments_are_checked():
    state = skeleton.ThreadSkeleton((1, 1), 10)
    with pytest.raises(TypeError):
        _native.add_root(state, PyNode(1, 0.0, 1.0, 0), False, 3, 2)  # a native node only
    with pytest.raises(TypeError):
        _native.add_root(state, _native.Node(1, 0.0, 1.0, 0), False, 3)
    with pytest.raises(ValueError):  # a class without those slots
        _native.add_root(object(), _native.Node(1, 0.0, 1.0, 0), False, 3, 2)


# ``skeleton.root_op`` (a top-level op read: ``Skeletons.add``) against ``_native.root_op``,
# without and with ``NEW_FAMILY_MARKS`` (a new family's symbol made in C, ``sym53_new``):
# skeletons fed the same ops, main thread or not, Python frames waiting or not, names new,
# seen, numbered (of a family known or not), long, not ASCII, or loop markers (the pattern's
# search asked or not), sifted where due, hold the same


def _skeletons_state(skeletons) -> list:
    """What the skeletons hold, each node told by its place on its top level."""
    held = []
    for state in skeletons.threads.values():
        held.append((state.key, [(n.sym, n.start, n.end, n.opener) for n in state.roots],
                     state.busy, [n if n is None or n is skeleton.SKIPPED else state.roots.index(n)
                                  for n in state.stack],
                     _root_state(state, state.seen)[2:] if state.main else sorted(state.seen),
                     state.frames, state.sifted, state.forgotten))
    return held + [skeletons.names, dict(skeletons.symbols.sym_of), skeletons.symbols.markers]


@needs_native
@settings(max_examples=150, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from([(1, 1), (1, 2)]),
                              st.sampled_from(["a", "b", "c_1", "c_2", "d", "get_batch", "e",
                                               "get_batch_7", "load_next_request_12",
                                               "aten::linear_backward", "op_ſ_get_batch",
                                               "Optimizer.step#SGD.step", "x1y2", "7"]),
                              st.booleans()), max_size=50))
def test_a_native_top_level_op_is_read_as_the_python_one(ops):
    runs = []
    for add, marks in ((skeleton.root_op, ()), (_native.root_op, None),
                       (_native.root_op, skeleton.NEW_FAMILY_MARKS)):
        skeletons = skeleton.Skeletons(100, 8)
        for k, (thread, name, frame) in enumerate(ops):
            state = skeletons.of(thread, 0)
            state.sift_at = 3  # (sifted often)
            if frame:
                state.frames = [(6.0 * k - 0.5, 6.0 * k + 5.5, "frame")]
            state.stack.clear()
            args = (skeletons, state, 6.0 * k, 6.0 * k + 5, name, skeleton._MIN_INSTANCES,
                    skeleton.REPEAT)
            add(*args) if marks is None else add(*args, marks)
        runs.append(_skeletons_state(skeletons))
    assert runs[0] == runs[1] == runs[2]


@needs_native
def test_a_new_familys_loop_marker_is_asked_of_the_pattern_only_where_it_may_be_one(
        monkeypatch):
    # ``sym53_new`` asks ``marker_match`` of a new family that is long enough and, if ASCII,
    # holds one of the words; the answers are the pattern's (the symbols it marks).
    asked = []
    marks = (skeleton.NEW_FAMILY_MARKS[0], skeleton.NEW_FAMILY_MARKS[1],
             lambda family: asked.append(family) or skeleton.NEW_FAMILY_MARKS[2](family))
    skeletons = skeleton.Skeletons(100, 8)
    state = skeletons.of((1, 1), 0)
    names = ["get_batch_3", "short", "no_words_here_at_all", "fetch_request", "é_long_name",
             "get_batch_4"]
    for k, name in enumerate(names):
        _native.root_op(skeletons, state, 6.0 * k, 6.0 * k + 5, name, skeleton._MIN_INSTANCES,
                        skeleton.REPEAT, marks)
    assert asked == ["get_batch_N", "fetch_request", "é_long_name"]
    symbols = skeletons.symbols
    assert {symbols.names[sym] for sym in symbols.markers} == \
        {family for family in asked if search.marker_match(family)}
    assert symbols.sym_of["get_batch_4"] == symbols.sym_of["get_batch_N"]  # (joined: ``new``)
