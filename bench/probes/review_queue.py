"""The curator review queue's page on a large graph, with its index (V008) and with one sort instead.

Starts an embedded Neo4j of its own, migrated to the latest schema, fills it with `--examples` examples
(a third of them pending, the rest approved; one pending example in 1,000 held for a curator, issue 33,
so that a page of 50 on 100k examples takes the held group whole and the rest from the others; only the
properties the queue reads), then times the queue's page query (`graphdb.store_queries.REVIEW_QUEUE_PAGE`:
the held examples first, then the others, each group oldest first, read in the order of V008's index
`example_review_queue_held`) against the same page read with one sort (every pending example sorted by
held first, then created_at, id), and profiles one run of each: the rows the index gave and the
database hits. Prints a Markdown table; `--md` writes it with the date, machine and command.

    python -m bench.probes.review_queue --examples 100000 --md bench/results/<date>_cpu/review_queue.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from graphdb import store_queries as q
from graphdb.connection import scratch_store
from graphdb.models import ReviewQueueFilter

SORTED_ORDER = """
MATCH (e:Example {review_status: $status})
WITH e ORDER BY e.held DESC, e.created_at, e.id"""
"""The same order by one sort of every example of the status (as before V007, commit 4d56db6, with the
held examples first)."""
SORTED = "one sort (every pending, held first)"

# As `review_queue_page` sends them, for a visitor without a key and no filter.
QUEUE_PARAMS = {
    "key_hash": "nobody",
    "status": "pending",
    "selected": None,
    **ReviewQueueFilter().model_dump(),
}

FILL = """
UNWIND range($start, $end) AS i
CREATE (:Example {id: 'e' + toString(i), source: 'A', target: 'B', task_id: 't' + toString(i % 100),
  device: 'cpu', verdict: 'passed', speedup: 1.0 + (i % 7), step_index: i % 8,
  review_status: CASE WHEN i % 3 = 0 THEN 'pending' ELSE 'approved' END, held: i % 3000 = 0,
  created_at: datetime('2026-01-01T00:00:00Z') + duration({seconds: i})})
"""


def plan_totals(profile: Any) -> tuple[int, int, list[str]]:
    """Database hits of the whole plan, rows of its Example index reads, and its sorting operators."""
    hits, rows, sorts = 0, 0, []
    stack = [profile]
    while stack:
        op = stack.pop()
        kind = op["operatorType"].split("@")[0]
        hits += int(op.get("dbHits", 0))
        details = str(op.get("args", {}).get("Details", ""))
        if kind.startswith("NodeIndex") and "Example(review_status" in details:
            rows += int(op.get("rows", 0))
        if kind in {"Sort", "Top", "PartialSort", "PartialTop"} and "created_at" in details:
            sorts.append(kind)
        stack.extend(op.get("children", []))
    return hits, rows, sorts


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--examples", type=int, default=100_000)
    parser.add_argument("--page", type=int, default=50, help="the queue's page size ($limit)")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--md", type=Path, default=None)
    args = parser.parse_args()

    queries = {
        "now (index example_review_queue_held)": q.REVIEW_QUEUE_PAGE,
        SORTED: q.REVIEW_QUEUE_PAGE.replace(q.REVIEW_ORDER, SORTED_ORDER),
    }
    assert queries[SORTED] != q.REVIEW_QUEUE_PAGE
    params = {**QUEUE_PARAMS, "limit": args.page}
    rows_out: list[str] = []
    with (
        scratch_store(heap_mb=1024, pagecache_mb=512, prefix="review-queue-") as store,
        store._driver.session(database=store._database, notifications_min_severity="OFF") as session,
    ):
        for start in range(1, args.examples + 1, 10_000):
            end = min(start + 9_999, args.examples)
            session.run(FILL, start=start, end=end).consume()
        session.run("CALL db.prepareForReplanning(300)").consume()
        first_ids = {}
        for name, query in queries.items():
            first = session.run(query, params).single()
            assert first is not None
            first_ids[name] = [s["id"] for s in first["pending"]]
            for _ in range(3):  # warm-up: plan cached, pages in memory
                session.run(query, params).consume()
        # Both read the same page: the held examples (every 3000th), then the oldest others.
        assert len({tuple(ids) for ids in first_ids.values()}) == 1, first_ids
        held = [i for i in first_ids[SORTED] if int(i[1:]) % 3000 == 0]
        assert held and first_ids[SORTED][: len(held)] == held, first_ids[SORTED]
        seconds: dict[str, list[float]] = {name: [] for name in queries}
        for _ in range(args.runs):  # alternating, so that both see the same machine
            for name, query in queries.items():
                started = time.perf_counter()
                session.run(query, params).consume()
                seconds[name].append(time.perf_counter() - started)
        for name, query in queries.items():
            profile = session.run("PROFILE " + query, params).consume().profile
            hits, index_rows, sorts = plan_totals(profile)
            ms = sorted(s * 1e3 for s in seconds[name])
            ids = first_ids[name]
            rows_out.append(
                f"| {name} | {statistics.median(ms):.1f} | {ms[0]:.1f}-{ms[-1]:.1f} | {index_rows} "
                f"| {hits} | {', '.join(sorts) or 'none'} | {ids[0]}, {ids[-1]} |"
            )
    pending, held_n = args.examples // 3, args.examples // 3000
    table = [
        f"Review queue page of {args.page} on {args.examples} examples ({pending} pending, {held_n} of them "
        f"held), {args.runs} runs",
        "",
        "| query | median ms | min-max ms | rows read from the index | db hits | sort of the examples "
        "| first, last id |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- |",
        *rows_out,
    ]
    print("\n".join(table))
    if args.md is not None:
        header = [
            "# The review queue's page, held examples first, with its index (V008) and with one sort",
            "",
            f"- date: {datetime.now(UTC).isoformat(timespec='seconds')}",
            f"- machine: {platform.node() or 'vm'} ({platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}); load average (1, 5, 15 min) at the end "
            f"{[round(x, 1) for x in os.getloadavg()]}",
            f"- command: `python -m bench.probes.review_queue {' '.join(sys.argv[1:])}`",
            "- one Bolt session, the query and its parameters as `review_queue_page` sends them; the "
            "'one sort' row is the same query with the page read by sorting every pending example",
            "",
        ]
        args.md.parent.mkdir(parents=True, exist_ok=True)
        args.md.write_text("\n".join(header + table) + "\n")


if __name__ == "__main__":
    main()
