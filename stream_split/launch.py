"""The ``stream-split`` console script: the process's own settings, made before anything
heavy is imported, then the command line (``cli.script``).

numpy's wheels bring OpenBLAS, which starts a thread pool as numpy is imported, one thread
per core, whose start-up costs about 50 ms of CPU (``stream-split boundaries`` of a one-event
trace: 0.17 -> 0.12 s user CPU on the 2-core machine; ``import numpy`` alone 0.17 -> 0.11 s
wall). Nothing here does linear algebra (no BLAS call anywhere: numpy's element-wise
functions, sorting and searching run without it), so the command asks for one thread
(``OPENBLAS_NUM_THREADS``), unless the user set it himself; the processes it starts
(``split --workers``, several ranks) inherit the setting. Only the command does this: it owns
its process, while a library leaves its caller's settings alone (as ``allocator`` does).

The CLI is imported with the garbage collector off, and what the imports made is then kept
out of its reach (``run.settle_imports``, which ``cli.script`` calls): the collector no longer
walks those objects while they are made, nor in later full collections, nor at exit.
"""
from __future__ import annotations

import gc
import os

import stream_split

#: The environment variables set for the command's process, and their values: each only
#: where the user has not set it.
PROCESS_ENVIRONMENT = {"OPENBLAS_NUM_THREADS": "1"}


def set_process_environment() -> None:
    """``PROCESS_ENVIRONMENT`` in this process's environment, where the user set none: only
    what is imported after it sees it (numpy reads it as it loads OpenBLAS)."""
    for name, value in PROCESS_ENVIRONMENT.items():
        os.environ.setdefault(name, value)


def script() -> None:
    """The console script: the process's settings, then the CLI, imported with the garbage
    collector off (``cli.script`` puts what the imports made out of its reach and turns it
    back on: ``run.settle_imports``)."""
    set_process_environment()
    gc.disable()
    stream_split.cli.script()  # loaded now (the package's late import), numpy with it
