"""The fleet's routing policy (pure): a task's candidates stay on the replica holding it until it is
busy, bursts spread to the least busy replica, and a failed replica is never chosen again for the
retry."""

from __future__ import annotations

from executor.fleet.routing import RoutingTable, choose_replica, task_key


def test_a_task_goes_home_while_its_replica_has_room() -> None:
    table = RoutingTable(depth=2)
    for name in ("r0", "r1", "r2"):
        table.add_replica(name)
    table.in_flight.update({"r0": 0, "r1": 0, "r2": 0})
    first = table.choose("task-a")
    assert first == "r0"  # ties by name
    table.started(first)
    table.started("r1")
    # r0 has one in flight (< depth 2): task-a still goes home, though r2 is idle.
    assert table.choose("task-a") == "r0"
    table.started("r0")
    # Now r0 is at depth: the burst spills to the least busy replica, and the home stays r0.
    assert table.choose("task-a") == "r2"
    assert table.home["task-a"] == "r0"


def test_other_tasks_get_their_own_home_on_the_least_busy_replica() -> None:
    table = RoutingTable(depth=1)
    for name in ("r0", "r1"):
        table.add_replica(name)
    table.started("r0")
    assert table.choose("task-b") == "r1"
    assert table.home == {"task-b": "r1"}


def test_new_tasks_are_spread_over_idle_replicas_and_keep_their_home() -> None:
    table = RoutingTable(depth=2)
    for name in ("r0", "r1"):
        table.add_replica(name)
    # Nothing in flight: a new task goes to the replica that holds the fewest tasks.
    assert [table.choose(t) for t in ("a", "b", "c", "a", "b", "c")] == ["r0", "r1", "r0", "r0", "r1", "r0"]


def test_a_removed_replica_loses_its_tasks_and_is_never_chosen() -> None:
    table = RoutingTable(depth=4)
    table.add_replica("r0")
    table.add_replica("r1")
    assert table.choose("task-a") == "r0"
    table.remove_replica("r0")
    assert "task-a" not in table.home
    assert table.choose("task-a") == "r1"
    assert table.choose("task-c", exclude=frozenset({"r1"})) is None


def test_the_retry_excludes_the_replica_that_failed() -> None:
    assert choose_replica({"r0": 0, "r1": 5}, holder="r0", depth=2, exclude=frozenset({"r0"})) == "r1"
    assert choose_replica({}, holder=None, depth=2) is None


def test_finished_never_goes_below_zero_and_task_keys_follow_content() -> None:
    table = RoutingTable()
    table.add_replica("r0")
    table.finished("r0")
    assert table.in_flight["r0"] == 0
    assert task_key('{"id": "a"}') == task_key('{"id": "a"}') != task_key('{"id": "a", "x": 1}')
