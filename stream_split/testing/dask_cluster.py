"""A real ``dask.distributed`` cluster on this machine, for tests and benchmarks.

One ``dask scheduler`` process and ``workers`` ``dask worker`` processes (no nanny: one
process each), all on 127.0.0.1, the scheduler on a free port; what a user starts by hand on
several hosts (README, "Dask"). The context manager yields the scheduler address once every
worker has registered, and always stops the processes, workers first.

What it must never do: listen beyond 127.0.0.1, or leave a process behind. A test process
killed outright cannot run its ``finally``: the workers then exit when the scheduler has been
gone ``death_timeout`` seconds, and the scheduler when it has been idle ``idle_timeout``.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator, Sequence


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(processes: Sequence[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def local_dask_cluster(workers: int, log_dir: Path, *, threads: int = 1,
                       python_path: Sequence[str] = (), cwd: str | None = None,
                       start_timeout: float = 60.0, idle_timeout: int = 600,
                       death_timeout: int = 60) -> Iterator[str]:
    """``tcp://127.0.0.1:PORT`` of a scheduler with ``workers`` registered worker processes.

    ``python_path`` is prepended to the processes' ``PYTHONPATH``: the scheduler unpickles
    the task graph and the workers run it, so both must import what the pipeline uses.
    Logs go to ``log_dir`` (``scheduler.log``, ``worker<i>.log``).
    """
    import distributed

    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    address = f"tcp://127.0.0.1:{free_port()}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [*map(str, python_path), os.environ.get("PYTHONPATH", "")])}
    scheduler, worker_processes = [], []
    with ExitStack() as logs:
        def start(args, log_name):
            log = logs.enter_context(open(log_dir / log_name, "w"))
            return subprocess.Popen([sys.executable, "-m", "dask", *args], cwd=cwd, env=env,
                                    stdout=log, stderr=subprocess.STDOUT)
        try:
            scheduler.append(start(
                ["scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1],
                 "--no-dashboard", "--idle-timeout", str(idle_timeout)], "scheduler.log"))
            for i in range(workers):
                worker_processes.append(start(
                    ["worker", address, "--host", "127.0.0.1", "--nthreads", str(threads),
                     "--no-nanny", "--no-dashboard", "--death-timeout", str(death_timeout),
                     "--local-directory", str(log_dir / f"worker{i}")], f"worker{i}.log"))
            deadline = time.monotonic() + start_timeout
            with distributed.Client(address, timeout=start_timeout) as client:
                client.wait_for_workers(workers, timeout=max(1.0, deadline - time.monotonic()))
            yield address
        finally:
            _stop(worker_processes)  # first: they would try to reconnect to the scheduler
            _stop(scheduler)
