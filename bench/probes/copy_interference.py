"""Do two GPUs' host<->device copies disturb each other, and does page-locked host memory stop it?
Device probe for issue 29 (run on a host with two GPUs; pycuda).

A function task's trials are timed on the host clock and include the candidate's own copies of the
task's host arrays, which the worker allocates as ordinary (pageable) numpy memory. A copy from
pageable memory is staged by the driver through a pinned buffer with a CPU copy; a copy from page-locked
memory is a DMA from the pages themselves. With the host memory's lock per device, a second replica took
copy-bound function tasks' medians up by 24 % on two H200s (session 21), so the lock is host-wide. This
probe asks whether that interference is the staging's: on GPU ``--device`` it times a synchronous round
trip as a candidate's ``cudaMemcpy`` makes it (``size`` bytes host to device, then back, then a context
synchronisation, on the host clock), ``--repeats`` times, alone and while another *process* on GPU
``--disturber-device`` loops the same copies, for host memory that is

- ``pageable``: ``numpy.empty`` (what the executor's workers use today),
- ``pinned``: ``pagelocked_empty`` (``cuMemHostAlloc``),
- ``registered``: ``numpy.empty`` then ``cuMemHostRegister`` (pycuda's ``register_host_memory``): what
  a worker could do to the arrays it already has;

and two more rows per size: pageable measured while the other GPU copies pinned memory, and pageable
while the other GPU runs a compute-only kernel loop (no host traffic: expected no effect). Interference
is the median with the disturber over the median alone, minus 1; CoV is the standard deviation of the
repeats over their mean. A row that fails (e.g. the driver refuses to register memory) says why and the
probe goes on. Rows past ``--budget-s`` are skipped.

    python3 bench/probes/copy_interference.py --sizes 64,256 --repeats 30 --out /tmp/ci.json
    python3 bench/probes/copy_interference.py --dry-run     # the plan and the table, no GPU needed

It prints a markdown table on stdout and writes nothing else unless given ``--out`` (the rows as JSON).
``bench/device/run_copy_interference_x2.sh`` runs it on a lent two-GPU host.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import select
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

KINDS = ("pageable", "pinned", "registered")
DISTURBERS = (*KINDS, "compute")
MB = 1 << 20
# After the disturber's first copy at a size is done, this long before the measured repeats begin.
SETTLE_S = 0.3
# How long the parent waits for the disturber to answer a command (its start: the driver and a context).
ANSWER_S = 60.0

# Dependent steps per thread of the compute loop's kernel: a few ms per launch on an H200, so the loop is
# the GPU's work, not launches and synchronisations.
SPIN_ROUNDS = 1 << 21
SPIN = r"""
extern "C" __global__ void spin(float* x, int rounds) {
    float v = x[threadIdx.x + blockIdx.x * blockDim.x];
    for (int r = 0; r < rounds; ++r) v = v * 0.999f + 0.001f;
    x[threadIdx.x + blockIdx.x * blockDim.x] = v;
}
"""


class ProbeError(Exception):
    """The probe cannot run as asked (bad arguments, no pycuda, a disturber that does not answer)."""


@dataclasses.dataclass(frozen=True)
class PlannedRow:
    """One measurement: host memory of ``kind`` timed on the measured GPU, with ``disturber`` on the
    other GPU (None: alone)."""

    size_mb: int
    kind: str
    disturber: str | None

    @property
    def label(self) -> str:
        return "alone" if self.disturber is None else f"other GPU: {self.disturber}"


def plan(sizes: Sequence[int], kinds: Sequence[str]) -> list[PlannedRow]:
    """The rows in the order they are measured: per size, per kind, alone then with the same kind's
    copies on the other GPU; then pageable beside pinned copies and beside a compute loop (when
    pageable is among ``kinds``). Each disturbed row follows the alone row it is compared with."""
    rows: list[PlannedRow] = []
    for size in sizes:
        for kind in kinds:
            rows += [PlannedRow(size, kind, None), PlannedRow(size, kind, kind)]
        if "pageable" in kinds:
            rows += [PlannedRow(size, "pageable", "pinned"), PlannedRow(size, "pageable", "compute")]
    return rows


def _positive_ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of whole numbers: {text!r}") from e
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"sizes must be positive MB counts: {text!r}")
    return values


def _kinds(text: str) -> list[str]:
    kinds = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if not kinds or unknown:
        raise argparse.ArgumentTypeError(f"kinds are some of {', '.join(KINDS)}; got {text!r}")
    return kinds


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--sizes", type=_positive_ints, default=[64, 256], help="MB per copy, e.g. 64,256")
    p.add_argument("--kinds", type=_kinds, default=list(KINDS), help="host memory kinds to measure")
    p.add_argument("--repeats", type=int, default=30, help="timed round trips per row (at least 3)")
    p.add_argument("--device", type=int, default=0, help="the GPU measured")
    p.add_argument("--disturber-device", type=int, default=1, help="the GPU the other process uses")
    p.add_argument("--budget-s", type=float, default=90.0, help="rows that would start later are skipped")
    p.add_argument("--out", type=Path, help="also write the rows as JSON here")
    p.add_argument("--dry-run", action="store_true", help="check the arguments, print the plan; no GPU")
    # The disturber's own mode (started by the probe, not by hand): --disturb KIND on --device.
    p.add_argument("--disturb", choices=DISTURBERS, help=argparse.SUPPRESS)
    return p


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The arguments, checked; a bad one exits with argparse's message (status 2)."""
    p = parser()
    args = p.parse_args(argv)
    if args.repeats < 3:
        p.error("--repeats must be at least 3 (a median and a spread)")
    if args.budget_s <= 0:
        p.error("--budget-s must be positive")
    if args.disturb is None and args.device == args.disturber_device:
        p.error("--device and --disturber-device must differ: the question is another GPU's copies")
    return args


def summary(samples_ms: Sequence[float]) -> dict[str, float]:
    """Median, mean, CoV (standard deviation over mean), min and max of the repeats (milliseconds)."""
    mean = statistics.fmean(samples_ms)
    return {
        "n": len(samples_ms),
        "median_ms": statistics.median(samples_ms),
        "mean_ms": mean,
        "cov": statistics.pstdev(samples_ms) / mean if mean > 0 else 0.0,
        "min_ms": min(samples_ms),
        "max_ms": max(samples_ms),
    }


def interference(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (each with ``size_mb``, ``kind``, ``disturber`` and ``stats`` or ``error``) with
    ``interference`` added to each disturbed row: its median over the same size and kind's alone median,
    minus 1 (None where either is missing)."""
    alone = {
        (r["size_mb"], r["kind"]): r["stats"]["median_ms"]
        for r in rows
        if r["disturber"] is None and r.get("stats")
    }
    out = []
    for r in rows:
        r = dict(r)
        base = alone.get((r["size_mb"], r["kind"]))
        if r["disturber"] is not None:
            r["interference"] = r["stats"]["median_ms"] / base - 1 if r.get("stats") and base else None
        out.append(r)
    return out


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The markdown table of ``rows`` (after :func:`interference`); a row not measured shows why."""
    lines = [
        "| MB | host memory (GPU measured) | condition | median ms | GB/s | CoV | min-max ms "
        "| interference | disturber's copies |",
        "|---:|---|---|---:|---:|---:|---|---:|---|",
    ]
    for r in rows:
        label = "alone" if r["disturber"] is None else f"other GPU: {r['disturber']}"
        if r.get("register_ms") is not None:
            label += f" (registered in {r['register_ms']:.1f} ms)"
        head = f"| {r['size_mb']} | {r['kind']} | {label} "
        s = r.get("stats")
        if not s:
            lines.append(head + f"| - | - | - | - | - | {r.get('error') or 'not measured'} |")
            continue
        gbps = 2 * r["size_mb"] * MB / (s["median_ms"] / 1e3) / 1e9
        inter = r.get("interference")
        inter_text = "-" if inter is None else f"{inter * 100:+.1f} %"
        other = r.get("disturber_report") or {}
        other_text = (
            f"{other['ops']} ops, {other['gbps']:.1f} GB/s" if other.get("gbps") else other.get("what", "-")
        )
        lines.append(
            head
            + f"| {s['median_ms']:.3f} | {gbps:.1f} | {s['cov']:.3f} | {s['min_ms']:.2f}-{s['max_ms']:.2f} "
            f"| {inter_text} | {other_text} |"
        )
    return "\n".join(lines) + "\n"


class Lines:
    """Lines read from a pipe's descriptor with a deadline, buffered here (not in a file object, whose
    read-ahead select() cannot see)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.pending = fd, b""

    def ready(self) -> bool:
        """Whether a whole line is here or the pipe has something to read now."""
        return b"\n" in self.pending or bool(select.select([self.fd], [], [], 0)[0])

    def read(self, timeout_s: float | None) -> str | None:
        """The next line (without its end), or None at the pipe's end or past ``timeout_s``."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while b"\n" not in self.pending:
            wait = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not select.select([self.fd], [], [], wait)[0]:
                return None
            chunk = os.read(self.fd, 4096)
            if not chunk:
                return None
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode()


# ---- the GPU side (pycuda imported only here) ----


class Buffers:
    """One size's host buffers of one kind (in and out) and a device buffer, on the current context."""

    def __init__(self, cuda: Any, kind: str, nbytes: int) -> None:
        import numpy as np

        self.cuda, self.kind = cuda, kind
        count = nbytes // 4
        if kind == "pinned":
            self.host_in = cuda.pagelocked_empty(count, np.float32)
            self.host_out = cuda.pagelocked_empty(count, np.float32)
        else:
            self.host_in = np.empty(count, np.float32)
            self.host_out = np.empty(count, np.float32)
        self.host_in.fill(1.0)  # every page touched before it is timed (or registered)
        self.host_out.fill(0.0)
        self.register_ms: float | None = None  # how long registering both took (what a worker would pay)
        if kind == "registered":
            # Through the driver as the worker does (executor.worker.gpu.RegisteredPages): pycuda's
            # register_host_memory fails on numpy 2 ("Cannot set the NumPy array 'base' dependency").
            from executor.worker.gpu import RegisteredPages

            self.pages = RegisteredPages()
            began = time.perf_counter()
            self.pages._lock(self.host_in)
            self.pages._lock(self.host_out)
            self.register_ms = (time.perf_counter() - began) * 1e3
        self.dev = cuda.mem_alloc(nbytes)

    def round_trip_ms(self) -> float:
        cuda = self.cuda
        start = time.perf_counter()
        cuda.memcpy_htod(self.dev, self.host_in)
        cuda.memcpy_dtoh(self.host_out, self.dev)
        cuda.Context.synchronize()
        return (time.perf_counter() - start) * 1e3

    def free(self) -> None:
        self.dev.free()
        for array in (self.host_in, self.host_out):
            if self.kind == "registered":
                self.pages._unlock(array)
                continue
            base: Any = getattr(array, "base", None)
            if hasattr(base, "free"):
                base.free()


def _context(device: int) -> tuple[Any, Any]:
    try:
        import pycuda.driver as cuda
    except ImportError as e:
        raise ProbeError(f"pycuda is not installed ({e}); --dry-run checks the arguments without it") from e
    cuda.init()
    if cuda.Device.count() <= device:
        raise ProbeError(f"GPU {device} asked for, {cuda.Device.count()} present")
    ctx = cuda.Device(device).retain_primary_context()
    ctx.push()
    return cuda, ctx


def disturb(kind: str, device: int, commands: Lines, stdout: IO[str]) -> int:
    """The disturber process: on GPU ``device``, wait for ``commands`` (``run MB``: loop the
    round trip of that size in ``kind`` memory, or the compute loop; ``idle``; ``quit``) and answer each
    on ``stdout`` (``running``; after ``idle``, a JSON line of what was done)."""
    cuda, ctx = _context(device)
    buffers: dict[int, Buffers] = {}
    spin = x = None
    if kind == "compute":
        import numpy as np
        from pycuda.compiler import SourceModule

        spin = SourceModule(SPIN, no_extern_c=True).get_function("spin")
        x = cuda.mem_alloc(264 * 256 * 4)
        cuda.memset_d32(x, 0, 264 * 256)
    print("ready", file=stdout, flush=True)
    size, ops, busy_s, first = 0, 0, 0.0, False
    try:
        while True:
            if size == 0 or commands.ready():
                line = commands.read(None)
                words = (line or "").split()
                if line is None or not words or words[0] == "quit":
                    return 0
                if words[0] == "idle":
                    gbps = 2 * size * MB * ops / busy_s / 1e9 if busy_s and kind != "compute" else 0.0
                    what = f"{ops} kernel loops" if kind == "compute" else f"{ops} round trips"
                    report = {"ops": ops, "busy_s": busy_s, "gbps": gbps, "what": what}
                    print(json.dumps(report), file=stdout, flush=True)
                    size = 0
                    continue
                size, ops, busy_s = int(words[1]), 0, 0.0
                if kind != "compute" and size not in buffers:
                    buffers[size] = Buffers(cuda, kind, size * MB)
                first = True
            if not size:
                continue  # idle: the next command is waited for above
            began = time.perf_counter()
            if spin is not None:
                spin(x, np.int32(SPIN_ROUNDS), block=(256, 1, 1), grid=(264, 1))
                cuda.Context.synchronize()
            else:
                buffers[size].round_trip_ms()
            busy_s += time.perf_counter() - began
            ops += 1
            if first:
                print("running", file=stdout, flush=True)
                first = False
    finally:
        for b in buffers.values():
            b.free()
        ctx.pop()


class Disturber:
    """A disturber process of one kind on the other GPU, started once and driven by commands."""

    def __init__(self, kind: str, device: int) -> None:
        self.kind = kind
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--disturb", kind, "--device", str(device)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        self.answers = Lines(self.proc.stdout.fileno())
        self._expect("ready")

    def _line(self) -> str:
        line = self.answers.read(ANSWER_S)
        if not line:
            self.close()
            raise ProbeError(f"the {self.kind} disturber did not answer (exit {self.proc.poll()})")
        return line.strip()

    def _expect(self, word: str) -> None:
        line = self._line()
        if line != word:
            raise ProbeError(f"the {self.kind} disturber answered {line!r}, not {word!r}")

    def _send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()

    def run(self, size_mb: int) -> None:
        self._send(f"run {size_mb}")
        self._expect("running")

    def idle(self) -> dict[str, Any]:
        self._send("idle")
        report: dict[str, Any] = json.loads(self._line())
        return report

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self._send("quit")
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def _attributes(cuda: Any, device: int) -> dict[str, int | None]:
    """The device attributes that say how it reaches pageable host memory (None: not in this pycuda)."""
    found: dict[str, int | None] = {}
    for name in (
        "PAGEABLE_MEMORY_ACCESS",
        "PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES",
        "UNIFIED_ADDRESSING",
    ):
        attribute = getattr(cuda.device_attribute, name, None)
        found[name.lower()] = None if attribute is None else int(cuda.Device(device).get_attribute(attribute))
    return found


def measure(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every planned row measured on the GPU (skipped past the budget); the rows and the setting."""
    began = time.monotonic()
    cuda, ctx = _context(args.device)
    setting = {
        "measured": f"GPU {args.device}: {cuda.Device(args.device).name()}",
        "disturber": f"GPU {args.disturber_device}",
        "driver": cuda.get_driver_version(),
        "kernel": platform.release(),
        "repeats": args.repeats,
        # Where the device reads pageable memory through the host's page tables, cuMemHostRegister
        # does not page-lock (the driver's documentation): the registered rows then mean less.
        **_attributes(cuda, args.device),
    }
    disturbers: dict[str, Disturber] = {}
    rows: list[dict[str, Any]] = []
    buffers: dict[tuple[int, str], Buffers] = {}
    try:
        for row in plan(args.sizes, args.kinds):
            out: dict[str, Any] = {"size_mb": row.size_mb, "kind": row.kind, "disturber": row.disturber}
            rows.append(out)
            if time.monotonic() - began > args.budget_s:
                out["error"] = f"skipped: past the {args.budget_s:g}-s budget"
                continue
            try:
                key = (row.size_mb, row.kind)
                if key not in buffers:
                    for old in [k for k in buffers if k[0] != row.size_mb]:  # one size's buffers at a time
                        buffers.pop(old).free()
                    buffers[key] = Buffers(cuda, row.kind, row.size_mb * MB)
                mine = buffers[key]
                if row.disturber is None and mine.register_ms is not None:
                    out["register_ms"] = round(mine.register_ms, 2)
                other = None
                if row.disturber is not None:
                    other = disturbers.get(row.disturber)
                    if other is None:
                        other = disturbers[row.disturber] = Disturber(row.disturber, args.disturber_device)
                    other.run(row.size_mb)
                    time.sleep(SETTLE_S)
                try:
                    for _ in range(3):  # warm: the driver's staging buffers, the clocks
                        mine.round_trip_ms()
                    samples = [mine.round_trip_ms() for _ in range(args.repeats)]
                finally:
                    if other is not None:
                        out["disturber_report"] = other.idle()
                out["stats"] = summary(samples)
                out["samples_ms"] = [round(s, 4) for s in samples]
            except (cuda.Error, ProbeError, OSError) as e:
                out["error"] = f"failed: {type(e).__name__}: {e}".replace("|", "/").replace("\n", " ")
        setting["seconds"] = round(time.monotonic() - began, 1)
    finally:
        for b in buffers.values():
            b.free()
        for d in disturbers.values():
            d.close()
        ctx.pop()
    return interference(rows), setting


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.disturb is not None:
        return disturb(args.disturb, args.device, Lines(sys.stdin.fileno()), sys.stdout)
    if args.dry_run:
        rows = [
            {"size_mb": r.size_mb, "kind": r.kind, "disturber": r.disturber}
            for r in plan(args.sizes, args.kinds)
        ]
        print(
            f"Plan: {len(rows)} rows of {args.repeats} round trips on GPU {args.device}, "
            f"disturbers on GPU {args.disturber_device} (dry run: nothing measured).\n"
        )
        print(table(interference(rows)), end="")
        return 0
    try:
        rows, setting = measure(args)
    except ProbeError as e:
        print(f"copy_interference: {e}", file=sys.stderr)
        return 2
    print(
        f"Round trips ({args.repeats} per row, host to device then back, synchronous) on "
        f"{setting['measured']}, other process on {setting['disturber']}; driver {setting['driver']}, "
        f"kernel {setting['kernel']}, {setting['seconds']} s; pageable access "
        f"{setting['pageable_memory_access']}, through the host's page tables "
        f"{setting['pageable_memory_access_uses_host_page_tables']}.\n"
    )
    print(table(rows), end="")
    if args.out:
        args.out.write_text(json.dumps({"setting": setting, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
