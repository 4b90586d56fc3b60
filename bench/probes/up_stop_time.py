"""`regraph up` as a user runs it: seconds to "Ready." on a fresh data directory and on a restart, and
seconds from Ctrl-C (SIGINT) or SIGTERM until the process has exited (issue 31: stopping took 9-14 s).

Each cycle starts ``python -m regraph_cli up`` (embedded Neo4j, the seed graph, the local executor,
the API) on free ports in one temporary data directory, waits for the banner's last line, stops it
with the signal, and times the exit; the second cycle reuses the data directory (a restart). After
each stop it checks that the ports are free again. ``--source`` runs another checkout's code.

    python -m bench.probes.up_stop_time --cycles 2
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from graphdb.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]


def _free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cycle(source: Path, data_dir: Path, stop_signal: int, log: Path) -> tuple[float, float, str]:
    """One start and stop: seconds to ready, seconds to exit after the signal, ports still held."""
    port, executor_port, neo4j_port = free_port(), free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REGRAPH_", "NEO4J_"))}
    env |= {
        "REGRAPH_DATA_DIR": str(data_dir),
        "REGRAPH_NEO4J_PORT": str(neo4j_port),
        "REGRAPH_LOG_FORMAT": "text",
        "PYTHONPATH": str(source),
    }
    command = [sys.executable, "-m", "regraph_cli", "up", "--port", str(port)]
    command += ["--executor-port", str(executor_port)]
    with log.open("a") as err:
        started = time.monotonic()
        process = subprocess.Popen(
            command, cwd=source, env=env, stdout=subprocess.PIPE, stderr=err, text=True
        )
        assert process.stdout is not None
        ready: float | None = None
        for line in process.stdout:
            if line.startswith("Ready."):
                ready = time.monotonic() - started
                break
        if ready is None:
            raise RuntimeError(f"not ready (exit {process.wait()}); see {log}")
        threading.Thread(target=process.stdout.read, daemon=True).start()  # drain
        signalled = time.monotonic()
        process.send_signal(stop_signal)
        process.wait(timeout=120)
        stopped = time.monotonic() - signalled
    ports = {"api": port, "executor": executor_port, "neo4j": neo4j_port}
    held = ",".join(name for name, p in ports.items() if not _free(p))
    return ready, stopped, held or "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT)
    parser.add_argument("--cycles", type=int, default=2)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="regraph-up-") as tmp:
        data_dir, log = Path(tmp) / "data", Path(tmp) / "up.log"
        for i in range(args.cycles):
            sig = signal.SIGINT if i % 2 == 0 else signal.SIGTERM
            ready, stopped, held = cycle(args.source.resolve(), data_dir, sig, log)
            rows.append(("fresh" if i == 0 else "restart", sig.name, ready, stopped, held))
        tail = log.read_text().splitlines()[-12:]
    print(f"source: {args.source}  load average: {os.getloadavg()[0]:.1f}")
    print(f"{'start':<8} {'signal':<8} {'ready s':>8} {'stop s':>7}  ports held after")
    for kind, sig_name, ready, stopped, held in rows:
        print(f"{kind:<8} {sig_name:<8} {ready:8.1f} {stopped:7.1f}  {held}")
    print("last log lines:", *tail, sep="\n  ")


if __name__ == "__main__":
    main()
