"""How the benchmarks' tests load the scripts they check: each benchmark is a script run by
path (``python benchmarks/bench.py``), not a module of a package, so a test loads it from its
file. One place for that, and for the paths the tests read."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
#: The package's data folder, and the sample trace shipped in it.
DATA = HERE.parent / "stream_split" / "data"
SAMPLE = DATA / "sample_trace.json.gz"


def load(script: str, name: str | None = None) -> ModuleType:
    """The benchmark script ``benchmarks/<script>.py`` as a module (named ``name``, else
    ``script``); the benchmarks' folder is on ``sys.path`` (one script imports another)."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    spec = importlib.util.spec_from_file_location(name or script, HERE / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
