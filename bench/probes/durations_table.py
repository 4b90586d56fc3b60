"""Per-module totals from two `pytest --durations=0 --durations-min=0.5` outputs, side by side.

    python -m bench.probes.durations_table BEFORE.txt AFTER.txt [--top 40]

Each item's setup, call and teardown lines (0.5 s and longer; shorter ones are not printed by pytest)
are summed per test module. Under xdist the per-item times are each worker's own, so a module's sum
is its share of one worker, not of the wall clock: the wall clocks are the last lines of the outputs.
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^(\d+\.\d+)s (setup|call|teardown)\s+(\S+?)::")


def per_module(path: Path) -> tuple[dict[str, dict[str, float]], str]:
    totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    summary = ""
    for line in path.read_text(errors="replace").splitlines():
        match = LINE.match(line)
        if match:
            seconds, phase, module = float(match[1]), match[2], match[3]
            totals[module][phase] += seconds
        elif re.search(r"\d+ passed", line) or line.startswith("rc="):
            summary += line.strip("= ") + "; "
    return totals, summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    before, before_summary = per_module(args.before)
    after, after_summary = per_module(args.after)
    modules = sorted(
        set(before) | set(after),
        key=lambda m: -max(sum(before.get(m, {}).values()), sum(after.get(m, {}).values())),
    )
    print(
        "| module | before: setup / call / teardown (s) | before total | after total | after: setup / call / teardown |"
    )
    print("|---|---|---|---|---|")
    for module in modules[: args.top]:
        b, a = before.get(module, {}), after.get(module, {})
        split_b = " / ".join(f"{b.get(p, 0):.0f}" for p in ("setup", "call", "teardown"))
        split_a = " / ".join(f"{a.get(p, 0):.0f}" for p in ("setup", "call", "teardown"))
        print(f"| {module} | {split_b} | {sum(b.values()):.0f} | {sum(a.values()):.0f} | {split_a} |")
    rest_b = sum(sum(before[m].values()) for m in modules[args.top :] if m in before)
    rest_a = sum(sum(after[m].values()) for m in modules[args.top :] if m in after)
    print(f"| ({len(modules) - args.top} more modules) | | {rest_b:.0f} | {rest_a:.0f} | |")
    all_b = sum(sum(v.values()) for v in before.values())
    all_a = sum(sum(v.values()) for v in after.values())
    print(f"| **sum of items >= 0.5 s** | | **{all_b:.0f}** | **{all_a:.0f}** | |")
    print()
    print(f"before: {before_summary}")
    print(f"after: {after_summary}")


if __name__ == "__main__":
    main()
