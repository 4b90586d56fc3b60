"""Which replica of the fleet evaluates a candidate: a pure policy, kept apart from Ray.

A replica that has evaluated a task holds what its next candidates need: the task's timing set on its
disk (and in its page cache), the reference's timing, and workers prepared for the task's next
candidate. So a candidate goes to the replica that *holds* its task while that replica is not busier
than ``depth`` evaluations in flight; past that, to the least busy live replica, so a burst of one
task (a batch, rollouts in flight) still spreads over the fleet. The holder does not change on such a
spill: the task keeps its home as long as that replica lives.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field


def task_key(task_json: str) -> str:
    """The routing key of a task: a hash of its whole content (two versions of a task are two keys)."""
    return hashlib.sha256(task_json.encode()).hexdigest()[:24]


@dataclass
class RoutingTable:
    """The tasks' home replicas and every live replica's evaluations in flight."""

    depth: int = 2
    in_flight: dict[str, int] = field(default_factory=dict)
    home: dict[str, str] = field(default_factory=dict)

    def add_replica(self, replica: str) -> None:
        """A replica joins (started, or a replacement)."""
        self.in_flight.setdefault(replica, 0)

    def remove_replica(self, replica: str) -> None:
        """A replica left (died, or was taken out): its tasks lose their home."""
        self.in_flight.pop(replica, None)
        self.home = {task: r for task, r in self.home.items() if r != replica}

    def choose(self, key: str, exclude: frozenset[str] = frozenset()) -> str | None:
        """The replica for a candidate of the task ``key`` (None when no live replica is left)."""
        homes = Counter(self.home.values())
        choice = choose_replica(self.in_flight, self.home.get(key), self.depth, exclude, homes)
        if choice is not None and key not in self.home:
            self.home[key] = choice
        return choice

    def started(self, replica: str) -> None:
        """An evaluation was sent to ``replica``."""
        if replica in self.in_flight:
            self.in_flight[replica] += 1

    def finished(self, replica: str) -> None:
        """An evaluation on ``replica`` ended (with a verdict or with the replica's death)."""
        if self.in_flight.get(replica, 0) > 0:
            self.in_flight[replica] -= 1


def choose_replica(
    in_flight: Mapping[str, int],
    holder: str | None,
    depth: int,
    exclude: frozenset[str] = frozenset(),
    homes: Mapping[str, int] | None = None,
) -> str | None:
    """The holder while it has fewer than ``depth`` evaluations in flight, else the least busy live
    replica (ties: the fewest ``homes``, the tasks it holds, then the name, so the choice is
    deterministic); ``exclude`` (a replica that just failed this evaluation) is never chosen."""
    homes = homes or {}
    live = {r: n for r, n in in_flight.items() if r not in exclude}
    if not live:
        return None
    if holder in live and live[holder] < depth:
        return holder
    return min(live, key=lambda r: (live[r], homes.get(r, 0), r))
