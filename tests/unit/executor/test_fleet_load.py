"""The fleet router's load accounting around one replica call (`Fleet._answer`): an evaluation counts in
its replica's load from the router's send until the replica's call ends, also when its caller gave up
(review 32: the router had already let it go while the replica still ran or queued it), and a call that
never left gives its place back at once.

The replica's actor handle is a stand-in for Ray's (``.remote`` returning an awaitable, as an
``ObjectRef`` is); the fleet's integration tests drive real replicas on a Ray cluster on loopback.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from executor.errors import EvaluationCancelled
from executor.fleet.router import Fleet, Replica
from executor.settings import ExecutorSettings


class _Remote:
    def __init__(self, call: Any) -> None:
        self._call = call

    def remote(self, *args: Any) -> Any:
        return self._call(*args)

    def options(self, **_: Any) -> _Remote:
        return self


class _Handle:
    """Ray's actor handle as `Fleet._answer` uses it: ``evaluate.remote(body[, token])`` and
    ``cancel.options(...).remote(token)``."""

    def __init__(self, evaluate: Any) -> None:
        self.evaluate = _Remote(evaluate)
        self.cancels: list[str] = []
        self.cancel = _Remote(self.cancels.append)


def _fleet(handle: _Handle) -> tuple[Fleet, Replica]:
    fleet = Fleet(ExecutorSettings())
    replica = Replica(name="replica-0", handle=handle, info={})
    fleet.replicas[replica.name] = replica
    fleet.table.add_replica(replica.name)
    fleet.table.started(replica.name)  # as Fleet.evaluate does before it asks
    return fleet, replica


def test_a_call_that_never_left_gives_its_place_back() -> None:
    def refuse(*_: Any) -> Any:
        raise RuntimeError("the actor handle refused the call")

    fleet, replica = _fleet(_Handle(refuse))
    with pytest.raises(RuntimeError):
        asyncio.run(fleet._answer(replica, "{}", threading.Event()))
    assert fleet.table.in_flight[replica.name] == 0


def test_a_given_up_evaluation_counts_until_its_replica_call_ends() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        call: asyncio.Future[str] = loop.create_future()
        handle = _Handle(lambda *_: call)
        fleet, replica = _fleet(handle)
        cancelled = threading.Event()
        asking = asyncio.ensure_future(fleet._answer(replica, "{}", cancelled))
        await asyncio.sleep(0.05)
        cancelled.set()  # the caller went away
        with pytest.raises(EvaluationCancelled):
            await asking
        assert len(handle.cancels) == 1  # the replica was told to stop it
        assert fleet.table.in_flight[replica.name] == 1  # still running or queued there
        call.set_result("cancelled")  # the replica's call ends
        await asyncio.sleep(0)
        assert fleet.table.in_flight[replica.name] == 0

    asyncio.run(scenario())


def test_an_answered_evaluation_leaves_the_load() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        call: asyncio.Future[str] = loop.create_future()
        fleet, replica = _fleet(_Handle(lambda *_: call))
        asking = asyncio.ensure_future(fleet._answer(replica, "{}", None))
        await asyncio.sleep(0.01)
        assert fleet.table.in_flight[replica.name] == 1
        call.set_result('{"verdict": "stand-in"}')
        assert await asking == '{"verdict": "stand-in"}'
        assert fleet.table.in_flight[replica.name] == 0

    asyncio.run(scenario())


def test_an_evaluation_dropped_at_its_deadline_raises_expired() -> None:
    """The router hands the replica the request's deadline on the wall clock, and a replica's
    ``expired`` answer (dropped unrun) becomes `EvaluationExpired` (answered 504 / ``batch_timeout``),
    not a verdict to parse; its place in the load is given back when the call ends."""
    import time

    from executor.errors import EvaluationExpired
    from executor.fleet.replica import EXPIRED

    sent: list[tuple[Any, ...]] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()

        def evaluate(*args: Any) -> Any:
            sent.append(args)
            answered: asyncio.Future[str] = loop.create_future()
            answered.set_result(EXPIRED)
            return answered

        fleet, replica = _fleet(_Handle(evaluate))
        with pytest.raises(EvaluationExpired):
            await fleet._answer(replica, "{}", threading.Event(), time.monotonic() + 30.0)
        await asyncio.sleep(0)
        assert fleet.table.in_flight[replica.name] == 0

    asyncio.run(scenario())
    ((body, token, wall),) = sent
    assert body == "{}" and isinstance(token, str)
    assert abs(wall - (time.time() + 30.0)) < 5.0, wall
