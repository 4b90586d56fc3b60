"""One key floods each face while another key's light requests are timed (issue 27's closing run).

Against a running stack (``regraph up``), on loopback. For each face in turn, key A runs ``--flood``
concurrent callers, each calling again as soon as its call ends, for ``--seconds``:

- ``v1``: ``POST /v1/cypher`` with a query that runs to the server's Cypher timeout;
- ``ui``: ``POST /ui/cypher`` (signed-in session, CSRF token) with the same query;
- ``mcp-cypher``: the MCP ``cypher`` tool (official ``mcp`` SDK client) with the same query;
- ``mcp-eval``: the MCP ``evaluate_candidate`` and ``start_evaluation`` tools, half each, with a candidate
  whose compile is slow (deep template recursion).

Meanwhile key B sends one light request a second, in turn ``GET /v1/techniques``, a small ``POST /v1/cypher``
and ``GET /readyz`` (and ``GET /healthz``), each on a fresh connection, and records status and latency.
A's answers are counted by kind: 429 (this key's slots are taken), 503 (the server's slots), 200, other.
Prints one table per face and, with ``--md``, appends it to a Markdown file.

    python -m bench.probes.face_flood --url http://127.0.0.1:18471 --token-a $A --token-b $B --seconds 30
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

SLOW_QUERY = "UNWIND range(1, 1000000000000) AS x WITH x WHERE x % 7 = 12 RETURN count(x) AS c"
SMALL_QUERY = "MATCH (t:Technique) RETURN count(t) AS n"
TASK_REF = "mandelbrot_q28_i32"
# Compiles for a long time: the task's naive kernel plus a template instantiated along two recursive branches.
SLOW_TEMPLATES = """
template <int N> struct F { static constexpr long v = F<N - 1>::v + F<N - 2>::v; };
template <> struct F<1> { static constexpr long v = 1; };
template <> struct F<0> { static constexpr long v = 0; };
template <int N, int M> struct G { static constexpr long v = G<N - 1, M>::v + G<N - 1, M + 1>::v; };
template <int M> struct G<0, M> { static constexpr long v = M; };
static_assert(F<80>::v + G<22, 0>::v > 0, "instantiated at compile time");
"""
TASKS_DIR = Path(__file__).resolve().parents[2] / "regraph_data" / "tasks"


def slow_candidate() -> str:
    """A candidate that passes the static checks (the task's naive code) and compiles slowly."""
    return SLOW_TEMPLATES + (TASKS_DIR / TASK_REF / "naive.cu").read_text(encoding="utf-8")


# A refused caller calls again after this (an attacker would not wait; this keeps the 2-core host usable).
REFUSED_PAUSE_S = 0.1
FACES = ("v1", "ui", "mcp-cypher", "mcp-eval")
B_PATHS = ("/v1/techniques", "/v1/cypher", "/readyz", "/healthz")


@dataclass
class Tally:
    """A's answers by kind, and B's latencies and failures per path."""

    a: Counter[str] = field(default_factory=Counter)
    a_seconds: list[float] = field(default_factory=list)
    b_ms: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in B_PATHS})
    b_bad: dict[str, Counter[str]] = field(default_factory=lambda: {p: Counter() for p in B_PATHS})
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count_a(self, kind: str, seconds: float) -> None:
        with self.lock:
            self.a[kind] += 1
            self.a_seconds.append(seconds)


def kind_of_text(text: str) -> str:
    """An MCP error or a /ui page's error, by what the limiter or the query said."""
    if "this key already runs" in text:
        return "429"
    if "the server already runs" in text:
        return "503"
    if re.search(r"time(d)? ?out|timeout|ran past", text, re.I):
        return "timeout"
    return "error: " + text[:60].replace("\n", " ")


def b_loop(url: str, token: str, stop: threading.Event, tally: Tally) -> None:
    """Key B: one light request a second, each path in turn, fresh connection each."""
    headers = {"X-API-Key": token, "Connection": "close"}
    i = 0
    with httpx.Client(base_url=url, timeout=30.0, headers=headers) as http:
        while not stop.is_set():
            path = B_PATHS[i % len(B_PATHS)]
            i += 1
            started = time.perf_counter()
            try:
                small = path == "/v1/cypher"
                r = http.post(path, json={"query": SMALL_QUERY}) if small else http.get(path)
                status = str(r.status_code)
            except httpx.HTTPError as e:
                status = type(e).__name__
            ms = (time.perf_counter() - started) * 1000
            with tally.lock:
                tally.b_ms[path].append(ms)
                if not status.startswith("2"):
                    tally.b_bad[path][status] += 1
            stop.wait(max(0.0, 1.0 - ms / 1000))


def http_flood(url: str, token: str, face: str, workers: int, until: float, tally: Tally) -> None:
    """Key A on /v1/cypher or /ui/cypher: `workers` threads, each calling again at once."""

    def worker() -> None:
        with httpx.Client(base_url=url, timeout=60.0, headers={"X-API-Key": token}) as http:
            csrf = sign_in(http, token) if face == "ui" else ""
            while time.monotonic() < until:
                started = time.monotonic()
                try:
                    if face == "v1":
                        r = http.post("/v1/cypher", json={"query": SLOW_QUERY})
                        kind = str(r.status_code)
                        if "cypher_timeout" in r.text:
                            kind = "timeout (400 cypher_timeout)"
                    else:
                        r = http.post(
                            "/ui/cypher", data={"query": SLOW_QUERY, "parameters": "{}", "csrf": csrf}
                        )
                        error = re.search(r'class="[^"]*error[^"]*"[^>]*>(.*?)</', r.text, re.S)
                        kind = str(r.status_code) if r.status_code != 200 else "200"
                        if r.status_code == 200 and ("already runs" in r.text or error):
                            kind = kind_of_text(r.text if "already runs" in r.text else error.group(1))  # type: ignore[union-attr]
                except httpx.HTTPError as e:
                    kind = type(e).__name__
                tally.count_a(kind, time.monotonic() - started)
                if kind in ("429", "503"):
                    time.sleep(REFUSED_PAUSE_S)

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def sign_in(http: httpx.Client, token: str) -> str:
    """Sign `http` in to /ui with `token`; the console's CSRF token."""
    page = http.get("/ui/login")
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None, page.text[:200]
    http.post("/ui/login", data={"key": token, "csrf": found.group(1), "next": "/ui/cypher"})
    console = http.get("/ui/cypher")
    found = re.search(r'name="csrf" value="([^"]+)"', console.text)
    assert found is not None, f"not signed in: {console.status_code}"
    return found.group(1)


def mcp_flood(url: str, token: str, face: str, workers: int, until: float, tally: Tally) -> None:
    """Key A on MCP: `workers` concurrent tool calls over one SDK client session, each calling again at once."""

    async def scenario() -> None:
        transport = streamable_http_client(
            f"{url}/mcp", http_client=create_mcp_http_client(headers={"X-API-Key": token})
        )
        candidate = slow_candidate()
        async with Client(transport) as client:

            async def one(n: int) -> None:
                while time.monotonic() < until:
                    started = time.monotonic()
                    if face == "mcp-cypher":
                        tool, args = "cypher", {"query": SLOW_QUERY}
                    else:
                        tool = "evaluate_candidate" if n % 2 == 0 else "start_evaluation"
                        args = {"source": candidate, "task_ref": TASK_REF}
                    try:
                        result = await client.call_tool(tool, args)
                        text = " ".join(getattr(c, "text", "") for c in result.content)
                        if result.is_error:
                            kind = kind_of_text(text)
                        else:
                            kind = f"200 ({json.loads(text).get('error_kind') or 'passed'})"
                            if tool == "start_evaluation":  # the job holds its slot: wait for its end
                                kind = await wait_job(client, text, until)
                    except Exception as e:  # a transport failure is an answer to count
                        kind = type(e).__name__
                    tally.count_a(
                        f"{tool.split('_')[0]}:{kind}" if face == "mcp-eval" else kind,
                        time.monotonic() - started,
                    )
                    if kind.endswith(("429", "503")):
                        await anyio.sleep(REFUSED_PAUSE_S)

            async with anyio.create_task_group() as group:
                for n in range(workers):
                    group.start_soon(one, n)

    anyio.run(scenario)


async def wait_job(client: Any, started: str, until: float) -> str:
    """Follow a started evaluation until it ends (or a minute past the flood); "200" once it has ended."""
    evaluation_id = json.loads(started).get("evaluation_id")
    if evaluation_id is None:
        return "200"
    while time.monotonic() < until + 60:
        status = await client.call_tool("evaluation_status", {"evaluation_id": evaluation_id, "wait_s": 5})
        text = " ".join(getattr(c, "text", "") for c in status.content)
        if status.is_error:
            return "status error"
        data = json.loads(text)
        if data.get("finished"):
            result = data.get("result") or {}
            return f"200 ({result.get('error_kind') or data.get('error') or 'passed'})"
    return "200 (still running)"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def table(face: str, workers: int, seconds: float, tally: Tally) -> str:
    a = ", ".join(f"{k}: {v}" for k, v in sorted(tally.a.items()))
    longest = max(tally.a_seconds, default=0.0)
    lines = [
        f"### {face}: {workers} flooding callers from key A for {seconds:.0f} s",
        "",
        f"A's answers: {a or 'none'} (longest call {longest:.1f} s)",
        "",
        "| B's path | requests | p50 ms | p95 ms | max ms | non-2xx |",
        "|---|---|---|---|---|---|",
    ]
    for path in B_PATHS:
        ms = tally.b_ms[path]
        bad = ", ".join(f"{k}: {v}" for k, v in tally.b_bad[path].items()) or "0"
        if ms:
            lines.append(
                f"| {path} | {len(ms)} | {statistics.median(ms):.0f} | {pct(ms, 0.95):.0f} | {max(ms):.0f} | {bad} |"
            )
    return "\n".join(lines) + "\n"


def run_face(url: str, token_a: str, token_b: str, face: str, workers: int, seconds: float) -> str:
    tally = Tally()
    stop = threading.Event()
    b = threading.Thread(target=b_loop, args=(url, token_b, stop, tally))
    b.start()
    until = time.monotonic() + seconds
    try:
        if face in ("v1", "ui"):
            http_flood(url, token_a, face, workers, until, tally)
        else:
            mcp_flood(url, token_a, face, workers, until, tally)
    finally:
        stop.set()
        b.join()
    return table(face, workers, seconds, tally)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token-a", required=True, help="the flooding key (a reader)")
    parser.add_argument("--token-b", required=True, help="the key whose light requests are timed")
    parser.add_argument("--flood", type=int, default=12, help="concurrent flooding callers per face")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--faces", default=",".join(FACES))
    parser.add_argument("--md", help="append the tables to this Markdown file")
    args = parser.parse_args()
    for face in args.faces.split(","):
        text = run_face(args.url, args.token_a, args.token_b, face, args.flood, args.seconds)
        print(text, flush=True)
        if args.md:
            with open(args.md, "a", encoding="utf-8") as out:
                out.write(text + "\n")
        time.sleep(3)  # let the last slow calls end before the next face


if __name__ == "__main__":
    main()
