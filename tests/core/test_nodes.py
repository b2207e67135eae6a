"""The skeleton's op (``skeleton.Node``): the native class (``stream_split._native.Node``,
where it is built) holds what the Python one (``skeleton.PyNode``, the fallback) holds, made,
changed and compared the same way."""
import gc

import pytest

from stream_split.core.detect import skeleton
from stream_split.core.detect.skeleton import PyNode

_native = skeleton._native
needs_native = pytest.mark.skipif(_native is None, reason="stream_split._native is not built")
_FIELDS = PyNode.__slots__


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
