"""How fast the GPU's SM clock rises under load after an idle spell, and how fast it falls again.

    python3 -m executor.diagnostics.clock_ramp [--idle 1.5] [--busy-ms 400] [--after-ms 300] [--out FILE]

The executor's kernel warm-up waits until the clocks have settled; this shows what it waits for. After
``--idle`` seconds with nothing on the GPU, one thread keeps the GPU busy with L2-flush writes (what
a heater tried in session 5 did) for ``--busy-ms`` while the main thread samples the SM clock through NVML
every 2 ms; then the load stops and the sampling goes on for ``--after-ms``. Prints a table of the
clock over time (and writes it as JSON with ``--out``). Needs pycuda and nvidia-ml-py (pynvml).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path
from typing import Any

SAMPLE_S = 0.002


def _load(stop: threading.Event, ready: threading.Event, go: threading.Event) -> None:
    import pycuda.driver as cuda

    ctx = cuda.Device(0).retain_primary_context()
    ctx.push()
    try:
        buf = cuda.mem_alloc(256 << 20)
        stream = cuda.Stream()
        ready.set()
        go.wait()
        while not stop.is_set():
            for _ in range(8):
                cuda.memset_d32_async(buf, 0x5A5A5A5A, (256 << 20) // 4, stream)
            stream.synchronize()
        buf.free()
        del stream
    finally:
        cuda.Context.pop()


def ramp(idle_s: float, busy_ms: float, after_ms: float) -> list[dict[str, Any]]:
    """Samples ``{"t_ms", "phase", "sm_mhz"}`` from the start of the load (negative: idle before it)."""
    import pycuda.driver as cuda
    import pynvml

    cuda.init()
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)

    def clock() -> int:
        return int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))

    samples: list[dict[str, Any]] = []
    stop, ready, go = threading.Event(), threading.Event(), threading.Event()
    thread = threading.Thread(target=_load, args=(stop, ready, go), daemon=True)
    thread.start()
    ready.wait()  # the context and the buffer are made before the idle spell
    start = time.perf_counter()
    while time.perf_counter() - start < idle_s:
        if (now := time.perf_counter()) - start > idle_s - 0.05:  # the last 50 ms of the idle spell
            samples.append({"t_ms": now, "phase": "idle", "sm_mhz": clock()})
        time.sleep(SAMPLE_S)
    began = time.perf_counter()
    go.set()
    for s in samples:  # idle samples: milliseconds before the load began (negative)
        s["t_ms"] = (s["t_ms"] - began) * 1000
    while (now := time.perf_counter()) - began < busy_ms / 1000:
        samples.append({"t_ms": (now - began) * 1000, "phase": "busy", "sm_mhz": clock()})
        time.sleep(SAMPLE_S)
    stop.set()
    thread.join()
    ended = time.perf_counter()
    while (now := time.perf_counter()) - ended < after_ms / 1000:
        samples.append({"t_ms": (now - began) * 1000, "phase": "after", "sm_mhz": clock()})
        time.sleep(SAMPLE_S)
    pynvml.nvmlShutdown()
    return samples


def table(samples: list[dict[str, Any]], step_ms: float = 20.0) -> str:
    """The first sample of every ``step_ms`` of each phase, as a markdown table."""
    lines = ["| phase | t ms | SM MHz |", "| --- | --- | --- |"]
    next_t: dict[str, float] = {}
    for s in samples:
        if s["t_ms"] >= next_t.get(s["phase"], -1e9):
            lines.append(f"| {s['phase']} | {s['t_ms']:.1f} | {s['sm_mhz']} |")
            next_t[s["phase"]] = s["t_ms"] + step_ms
    return "\n".join(lines)


def main() -> None:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", type=float, default=1.5, help="idle seconds before the load")
    parser.add_argument("--busy-ms", type=float, default=400.0)
    parser.add_argument("--after-ms", type=float, default=300.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    samples = ramp(args.idle, args.busy_ms, args.after_ms)
    print(table(samples))
    if args.out:
        args.out.write_text(json.dumps(samples) + "\n")


if __name__ == "__main__":
    main()
