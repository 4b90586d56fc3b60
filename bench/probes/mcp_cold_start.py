"""`regraph mcp` over stdio as a coding agent starts it: seconds to the handshake, the tool list and the
first real answers, with the server's CPU seconds (issue 31: a stdio start under 10 s cold).

Each cycle launches ``python -m regraph_cli mcp`` through the MCP SDK's own client (stdio), on its own
data directory (embedded Neo4j, the seed graph, a local executor: the defaults a user gets), and times
from the launch: the handshake (`initialize`), `tools/list`, the first `list_tasks` answer (needs the
graph) and the first `next_techniques` answer (needs the graph and the embedding model). The first
cycle starts on an empty data directory, the next ones are restarts on it. CPU seconds are those of the
server's process tree (the server, its executor, its Neo4j JVM) from /proc, which the machine's load
inflates far less than wall seconds.

    python -m bench.probes.mcp_cold_start --cycles 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from bench.probes.ready_time import GROUPS, sample_tree
from graphdb.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]
TASK_ID = "mandelbrot_q28_i32"
MILESTONES = ("handshake", "tools listed", "list_tasks answered", "next_techniques answered")


def _server_pid() -> int | None:
    """Our child running `regraph_cli mcp` (the SDK's client spawned it)."""
    me = str(os.getpid())
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if raw[raw.rindex(")") + 2 :].split()[1] == me and b"regraph_cli\x00mcp" in cmdline:
            return int(entry)
    return None


def _text(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


async def _call(client: Client, tool: str, arguments: dict[str, Any]) -> Any:
    """Call a tool as an agent would: again after a "starting" answer (every second, 10 minutes at most)."""
    for _ in range(600):
        result = await client.call_tool(tool, arguments)
        if not result.is_error:
            return result
        if not _text(result).startswith("starting"):
            raise RuntimeError(f"{tool} failed: {_text(result)[:500]}")
        await anyio.sleep(1.0)
    raise TimeoutError(f"{tool}: still starting after 10 minutes")


async def one_cycle(source: Path, data_dir: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REGRAPH_", "NEO4J_"))}
    env |= {
        "REGRAPH_DATA_DIR": str(data_dir),
        "REGRAPH_NEO4J_PORT": str(free_port()),
        "PYTHONPATH": str(source),
    }
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "regraph_cli", "mcp", "--executor-port", str(free_port())],
        env=env,
        cwd=str(source),
    )
    marks: dict[str, float] = {}
    cpu: dict[str, dict[str, float]] = {}
    kinds: dict[int, str] = {}
    code = (source / "regraph_data" / "tasks" / TASK_ID / "reference.cpp").read_text()
    started = time.monotonic()

    def mark(name: str) -> None:
        marks[name] = time.monotonic() - started
        pid = _server_pid()
        cpu[name] = sample_tree(pid, kinds)[0] if pid is not None else {g: 0.0 for g in GROUPS}

    async with Client(server) as client:  # the server's log goes to our standard error
        mark("handshake")
        tools = await client.list_tools()
        mark("tools listed")
        tasks = await _call(client, "list_tasks", {})
        mark("list_tasks answered")
        following = await _call(client, "next_techniques", {"code": code, "k": 1})
        del following
        mark("next_techniques answered")
    return {
        "marks": marks,
        "cpu": cpu,
        "tools": len(tools.tools),
        "tasks": json.loads(_text(tasks)).get("count"),
        "load": os.getloadavg()[0],
    }


def table(cycles: list[dict[str, Any]], label: str) -> str:
    kinds = ["fresh"] + ["restart"] * (len(cycles) - 1)
    lines = [
        f"### {label}",
        "",
        "| milestone | "
        + " | ".join(f"{k} {i + 1}: s from launch | CPU s server/exec/neo4j" for i, k in enumerate(kinds))
        + " |",
        "|---" * (1 + 2 * len(cycles)) + "|",
    ]
    for name in MILESTONES:
        row = [name]
        for c in cycles:
            used = c["cpu"][name]
            row += [f"{c['marks'][name]:.1f}", "/".join(f"{used[g]:.1f}" for g in GROUPS)]
        lines.append("| " + " | ".join(row) + " |")
    loads = ", ".join(f"{c['load']:.1f}" for c in cycles)
    lines += [
        "",
        f"Tools listed: {cycles[0]['tools']}; tasks: {cycles[0]['tasks']}. Load average (1 min) "
        f"at the end of each cycle: {loads}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout whose `regraph mcp` runs")
    parser.add_argument("--label", default="this checkout")
    parser.add_argument("--cycles", type=int, default=2, help="a fresh start, then restarts")
    parser.add_argument("--md", type=Path, help="append the table here")
    args = parser.parse_args(argv)
    cycles = []
    with tempfile.TemporaryDirectory(prefix="regraph-mcp-") as tmp:
        for _ in range(args.cycles):
            cycles.append(anyio.run(one_cycle, args.source.resolve(), Path(tmp) / "data"))
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    text = table(cycles, f"`regraph mcp` over stdio, {args.label} (`{args.source}`), {stamp}")
    print(text)
    if args.md:
        with args.md.open("a") as out:
            out.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
