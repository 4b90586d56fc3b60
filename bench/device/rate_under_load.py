"""Session 36's check on a GPU host: the host copy rate (``measure_host_gbps``, timed by the thread's CPU
time) alone and beside N processes copying memory in a loop on other cores; prints one line per case."""

from __future__ import annotations

import multiprocessing as mp
import sys
import time

import numpy as np

from executor.worker.host import measure_host_gbps


def _copier(stop: mp.synchronize.Event) -> None:
    src = np.ones(256 << 20, np.uint8)
    dst = np.empty_like(src)
    while not stop.is_set():
        np.copyto(dst, src)


def main() -> None:
    counts = [int(a) for a in sys.argv[1:]] or [0, 2, 8]
    for n in counts:
        stop = mp.Event()
        procs = [mp.Process(target=_copier, args=(stop,)) for _ in range(n)]
        for p in procs:
            p.start()
        time.sleep(1.0 if n else 0.0)
        try:
            rates = [round(measure_host_gbps(), 1) for _ in range(5)]
        finally:
            stop.set()
            for p in procs:
                p.join(10)
        print(f"copiers {n}: host_gbps {rates}", flush=True)


if __name__ == "__main__":
    main()
