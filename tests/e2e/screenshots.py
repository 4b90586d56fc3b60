"""Screenshots of the curation workspace's main pages, on the seed graph, for the README.

    python -m tests.e2e.screenshots docs/screenshots [relabel-queue,duplicates]

Starts its own embedded Neo4j, the executor and the API (as the browser tests do), signs in as the
admin key and saves one PNG per page (or only the pages named by the second argument).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from graphdb.connection import open_graph
from graphdb.models import Role
from tests.conftest import graph_server_options
from tests.e2e.stack import JOB_TASK, chromium, fresh_context, record_queued_name, running_stack, sign_in

SHOTS = [
    ("queue", "/ui/queue", "#diff"),
    ("technique", "/ui/technique?name=Shared+memory+tiling", "#technique-name"),
    ("techniques", "/ui/techniques", "#techniques"),
    ("graph", "/ui/graph", "#graph[data-ready=true]"),
    ("relabel", "/ui/relabel", "#decisions"),
    ("relabel-queue", "/ui/relabel-queue", "#relabel-queue"),
    ("duplicates", "/ui/duplicates", "#duplicates"),
    ("cypher", "/ui/cypher?example=0", "#cypher-query"),
    ("audit", "/ui/audit", "#audit"),
    ("admin", "/ui/admin", "#keys"),
]


def take(page: Page, url: str, out: Path, only: set[str] | None = None) -> None:
    """Save each page of SHOTS (those in `only`, when given), then a finished job's page, as PNGs in `out`."""
    page.set_default_timeout(120_000)
    for name, path, ready in SHOTS:
        if only is not None and name not in only:
            continue
        page.goto(url + path)
        page.wait_for_selector(ready)
        if name == "cypher":
            page.click("#cypher-run")
            page.wait_for_selector("#cypher-result")
        time.sleep(0.5)  # the graph's layout and fonts settle
        page.screenshot(path=str(out / f"{name}.png"))
    if only is not None and "job" not in only:
        return
    page.goto(f"{url}/ui/jobs")
    page.fill("#job-task", JOB_TASK)
    page.fill("#job-budget", "4")
    page.click("#job-start")
    page.wait_for_selector("#job-result")
    page.wait_for_selector("#job[data-ended=true]")
    time.sleep(0.5)
    page.screenshot(path=str(out / "job.png"))


def main(out: Path, only: set[str] | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory() as tmp,
        open_graph(graph_server_options(Path(tmp) / "neo4j")) as graph,
        running_stack(graph.driver, graph.target, Path(tmp)) as stack,
        sync_playwright() as playwright,
        chromium(playwright) as browser,
        fresh_context(browser) as context,
    ):
        # The seed graph leaves no name undecided: one is recorded so the queue shows an item.
        record_queued_name(stack.store, "Stage tiles through smem", "Shared memory tiling")
        page = context.new_page()
        sign_in(page, stack.url, stack.tokens[Role.ADMIN])
        take(page, stack.url, out, only)


if __name__ == "__main__":
    main(
        Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots"),
        set(sys.argv[2].split(",")) if len(sys.argv) > 2 else None,
    )
