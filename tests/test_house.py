"""The house rules of the package, checked on its source (issue 20): short functions, imports at
the top of a module (the one late import: the package's ``__getattr__``; a function imports
only an optional extra, or one of a few standard modules that most runs never need), no
import circle, every threshold of the detector named in its rules, and the library
independent of the command line.

These read the code, not run it: a rule broken anywhere in ``stream_split/`` fails here with the
places named.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "stream_split"
#: What the rules do not cover: test helpers that ship in the package, and generated code.
EXEMPT = ("testing", "_proto")
MAX_FUNCTION_LINES = 60
#: Optional extras (and platform modules) a function may import where it needs them, so that the
#: package imports without them.
OPTIONAL_IMPORTS = ("matplotlib", "plotly", "pyarrow", "apache_beam", "dask", "zstandard", "hta",
                    "fcntl")
#: Standard modules a function may import where only it needs them: imported at the top, each
#: would cost every command's start-up, and most runs never get there (tempfile: a run that
#: spills; shutil, queue, threading: the pieces of ``split``). With bz2, lzma and random, which
#: they import: 12.5 M instructions of the 594 M of ``boundaries`` on a two-event trace.
LATE_STANDARD_IMPORTS = ("tempfile", "shutil", "queue", "threading")
#: The one module that imports late, by name (PEP 562 ``__getattr__``): the package's public
#: names, and ``stream_split.<module>`` used in the package's code, loaded on first use.
LATE_IMPORTER = "__init__.py"
#: Numbers in the detector that are arithmetic, not thresholds.
PLAIN_NUMBERS = {0, 1, -1, 0.0, 1.0}


def _modules() -> dict[str, ast.Module]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in EXEMPT:
            continue
        found[str(rel)] = ast.parse(path.read_text(), str(path))
    return found


MODULES = _modules()


def _functions(tree: ast.Module):
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _module_name(rel: str) -> str:
    parts = ["stream_split", *Path(rel).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_function_is_longer_than_sixty_lines():
    long = [f"{rel}:{f.lineno} {f.name} ({f.end_lineno - f.lineno + 1} lines)"
            for rel, tree in MODULES.items() for f in _functions(tree)
            if f.end_lineno - f.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, "functions over 60 lines:\n" + "\n".join(long)


def test_functions_import_only_optional_extras_and_late_standard_modules():
    inner = []
    for rel, tree in MODULES.items():
        for f in _functions(tree):
            for node in ast.walk(f):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = [node.module or ""]
                else:
                    continue
                inner += [f"{rel}:{node.lineno} {f.name} imports {name}" for name in names
                          if name.split(".")[0] not in OPTIONAL_IMPORTS + LATE_STANDARD_IMPORTS]
    assert not inner, "imports inside functions:\n" + "\n".join(inner)


def test_only_the_package_face_imports_by_name():
    """``importlib`` and ``__import__`` load a module late, out of sight of the rule above: only
    the package's ``__getattr__`` may (a module needed only by some commands or options is
    used as ``stream_split.<module>.<name>``, and loaded there)."""
    by_name = [f"{rel}:{node.lineno}" for rel, tree in MODULES.items() if rel != LATE_IMPORTER
               for node in ast.walk(tree)
               if (isinstance(node, ast.Name) and node.id == "__import__")
               or (isinstance(node, (ast.Import, ast.ImportFrom))
                   and any((getattr(node, "module", None) or a.name).startswith("importlib")
                           for a in node.names))]
    assert not by_name, "imports by name outside stream_split/__init__.py:\n" + "\n".join(
        by_name)


def _imports_of(rel: str, tree: ast.Module) -> set[str]:
    """The package's modules that ``rel`` imports, anywhere in it (a function's import counts:
    it ties the modules as surely, only later); ``TYPE_CHECKING`` blocks left out. ``from
    stream_split import schema`` names the module ``schema``; ``from stream_split.x import y``
    names ``x`` (and ``x.y`` where that is a module); ``stream_split.x.f()``, the package's late
    import of ``x``, names ``x``."""
    here = _module_name(rel)
    package = here if rel.endswith("__init__.py") else here.rpartition(".")[0]
    out = set()
    for node in _nodes_outside_type_checking(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("stream_split")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                kept = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(kept + ([base] if base else []))
            if not base.startswith("stream_split"):
                continue
            submodules = {f"{base}.{a.name}" for a in node.names} & KNOWN
            out |= submodules or {base}
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == "stream_split" and f"stream_split.{node.attr}" in KNOWN):
            out.add(f"stream_split.{node.attr}")
    return out


def _nodes_outside_type_checking(tree: ast.AST):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        yield node
        yield from _nodes_outside_type_checking(node)


KNOWN = {_module_name(rel) for rel in MODULES}


def _import_graph() -> dict[str, set[str]]:
    graph = {}
    for rel, tree in MODULES.items():
        graph[_module_name(rel)] = {m for m in _imports_of(rel, tree) if m in KNOWN}
        graph[_module_name(rel)].discard(_module_name(rel))
    return graph


def test_no_import_circle():
    graph = _import_graph()
    done: set[str] = set()
    circles = []

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            circles.append(" -> ".join(path[path.index(node):] + [node]))
            return
        if node in done:
            return
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, path + [node])
        done.add(node)

    for module in sorted(graph):
        visit(module, [])
    assert not circles, "import circles:\n" + "\n".join(sorted(set(circles)))


def test_a_package_importing_its_own_face_is_seen_as_a_circle():
    """The circle check itself finds a loop through a package's ``__init__``."""
    assert _imports_of("cli.py", ast.parse("from stream_split import library\n")) == {
        "stream_split.library"}
    assert _imports_of("cli.py", ast.parse("from stream_split import __version__\n")) == {
        "stream_split"}
    inside = ast.parse("def f():\n    from stream_split.cli import main\n")
    assert _imports_of("library.py", inside) == {"stream_split.cli"}
    late = ast.parse("import stream_split\ndef f():\n    stream_split.cli.main()\n")
    assert _imports_of("library.py", late) == {"stream_split", "stream_split.cli"}


def test_the_library_does_not_import_the_command_line():
    assert "stream_split.cli" not in _imports_of("library.py", MODULES["library.py"])


def _thresholds(tree: ast.Module) -> list[ast.Constant]:
    """Numbers a decision turns on: those in a comparison (``n < 2``, ``share > 0.5 * x``) or a
    ``min``/``max`` bound, and those a module or class names outright (``LIMIT = 64``). Arithmetic (an
    index, ``// 2``, ``** 2``, ``round(x, 3)``) is not a threshold; 0, 1 and -1 never are."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("min", "max")):
            parts = node.args
        elif isinstance(node, (ast.Module, ast.ClassDef)):
            parts = [n.value for n in node.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                     and isinstance(n.value, ast.Constant)]
        else:
            continue
        for part in parts:
            found += [c for c in _outside_indices(part) if isinstance(c, ast.Constant)
                      and type(c.value) in (int, float) and c.value not in PLAIN_NUMBERS]
    return found


def _outside_indices(node: ast.AST):
    """``node`` and what it holds, leaving out subscripts (``bag[2]`` is a field, not a
    threshold)."""
    yield node
    for child in ast.iter_child_nodes(node):
        if isinstance(node, ast.Subscript) and child is node.slice:
            continue
        yield from _outside_indices(child)


def test_the_threshold_finder_sees_comparisons_and_named_limits():
    tree = ast.parse("LIMIT = 64\nif n < 2 or x > 0.5 * y: pass\nz = a[len(a) // 2] ** 2\n"
                     "if b[2] > 0: pass\n")
    assert sorted(c.value for c in _thresholds(tree)) == [0.5, 2, 64]


@pytest.mark.skipif(not (PACKAGE / "core" / "detect").is_dir(), reason="no detect package")
def test_every_detector_threshold_is_named_in_rules():
    bare = [f"{rel}:{c.lineno} {c.value!r}" for rel, tree in MODULES.items()
            if rel.startswith("core/detect/") and not rel.endswith("rules.py")
            for c in _thresholds(tree)]
    assert not bare, "thresholds outside rules.py:\n" + "\n".join(bare)
