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
import time
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
    """Ray's actor handle as `Fleet._answer` uses it: ``evaluate.remote(body[, token[, deadline]])``,
    ``cancel.options(...).remote(token)`` and ``clock.options(...).remote()`` (the replica host's wall
    clock, ``skew`` ahead of this one's)."""

    def __init__(self, evaluate: Any, skew: float = 0.0) -> None:
        self.evaluate = _Remote(evaluate)
        self.cancels: list[str] = []
        self.cancel = _Remote(self.cancels.append)
        self.skew = skew
        self.clocks = 0
        self.clock = _Remote(self._clock)

    async def _clock(self) -> float:
        self.clocks += 1
        return time.time() + self.skew


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


@pytest.mark.parametrize("skew", [0.0, 900.0, -900.0])
def test_an_evaluation_dropped_at_its_deadline_raises_expired(skew: float) -> None:
    """The router hands the replica the request's deadline on the replica's wall clock (measured:
    ``skew`` ahead of the router's), and a replica's ``expired`` answer (dropped unrun) becomes
    `EvaluationExpired` (answered 504 / ``batch_timeout``), not a verdict to parse; its place in the
    load is given back when the call ends."""
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

        fleet, replica = _fleet(_Handle(evaluate, skew))
        with pytest.raises(EvaluationExpired):
            await fleet._answer(replica, "{}", threading.Event(), time.monotonic() + 0.5)
        await asyncio.sleep(0)
        assert fleet.table.in_flight[replica.name] == 0

    asyncio.run(scenario())
    ((body, token, wall),) = sent  # under EARLY_EXPIRED_S left: no second send
    assert body == "{}" and isinstance(token, str)
    assert abs(wall - (time.time() + skew + 0.5)) < 0.5, wall


def test_a_replica_that_answers_expired_early_is_warned_of_and_asked_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A replica answers ``expired`` with 30 s of the limit left on the router's clock (its clock set
    since it was measured): the router warns, naming it, measures its clock again, and sends the
    evaluation once more, whose answer is the caller's; each call's place in the load is given back."""
    from executor.fleet.replica import EXPIRED

    answers = [EXPIRED, '{"a": "verdict"}']
    handle: _Handle

    async def scenario() -> str:
        loop = asyncio.get_running_loop()

        def evaluate(*_: Any) -> Any:
            answered: asyncio.Future[str] = loop.create_future()
            answered.set_result(answers.pop(0))
            return answered

        nonlocal handle
        handle = _Handle(evaluate)
        fleet, replica = _fleet(handle)
        answer = await fleet._answer(replica, "{}", None, time.monotonic() + 30.0)
        await asyncio.sleep(0)
        assert fleet.table.in_flight[replica.name] == 0
        return answer

    with caplog.at_level("WARNING", logger="executor.fleet.router"):
        assert asyncio.run(scenario()) == '{"a": "verdict"}'
    assert answers == [] and handle.clocks == 2  # measured before the first send, and again
    (warned,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "replica-0 dropped an evaluation as expired" in warned, warned
