"""The CPU seconds of one jailed worker start, as the executor starts them (``python -m executor.worker
probe candidate host``: its jail, imports, its directory, its result; no job).

The executor's bytecode step runs first (:func:`executor.sandbox.worker_protection`), then ``--starts``
probes one after the other; the figure is the CPU of the reaped children (the jail's ``unshare``, its
init and the worker) per start, and the wall time per start. Run it by path with the tree to measure on
the import path, in the environment ``./dev test`` gives (bytecode under a prefix), from a tree with no
bytecode beside its sources (a clean clone's state), e.g. a before/after::

    find /tmp/before/executor -name __pycache__ -prune -exec rm -rf {} +
    env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$REGRAPH_CACHE_DIR/pycache \\
        PYTHONPATH=/tmp/before python bench/probes/worker_start_cpu.py --starts 10
"""

from __future__ import annotations

import argparse
import resource
import time

from executor.sandbox import _probe, worker_protection


def main() -> None:
    """Print the CPU and wall seconds of one jailed worker start (the mean of ``--starts``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=10)
    args = parser.parse_args()
    protection = worker_protection("host", "candidate")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    for _ in range(args.starts):
        ok, out = _probe("candidate", "host", protection)
        if not ok:
            raise SystemExit(f"the probe failed: {out[-800:]}")
    wall = (time.monotonic() - started) / args.starts
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / args.starts
    print(f"{protection}: {cpu:.3f} CPU-s per worker start, {wall:.3f} s wall, {args.starts} starts")


if __name__ == "__main__":
    main()
