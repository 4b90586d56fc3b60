"""`executor.app.batch_verdicts`, the batch route's core, with stand-in item coroutines (what one
item's evaluation would await: a sleep of a given length, or an error) in place of real evaluations:
what a batch past its limit answers, what its stop and its caller's going away leave running."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from executor.app import batch_verdicts
from executor.errors import EvaluationCancelled
from executor.protocol import CandidateSource, EvaluateRequest
from executor.taskformat import load_task
from executor.verdict import NOT_JUDGED, ErrorKind, Stage, Verdict

SAXPY = load_task(Path(__file__).parent / "fixtures" / "tasks" / "saxpy")


def _items(count: int) -> list[EvaluateRequest]:
    return [EvaluateRequest(task=SAXPY, candidate=CandidateSource(source=f"// {i}\n")) for i in range(count)]


def _index(item: EvaluateRequest) -> int:
    return int(item.candidate.source.split()[1])


def _judged(item: EvaluateRequest) -> Verdict:
    return Verdict(
        task_id=SAXPY.id,
        stage=Stage.STATIC,
        passed=False,
        error=ErrorKind.STATIC_REJECTED,
        message=str(_index(item)),
    )


def test_a_batch_past_its_limit_keeps_what_it_judged_and_stops_the_rest() -> None:
    """Items of 0.1, 0.5, 5 and 30 s under a 1-s limit: the two quick ones keep their verdicts, the
    slow ones are ``batch_timeout`` (not judged) and stopped (``cancelled`` set, their coroutines
    cancelled), and the batch is answered at its limit, not at its slowest item's end."""
    lengths = [0.1, 0.5, 5.0, 30.0]
    stopped: list[int] = []

    async def evaluate(item: EvaluateRequest) -> Verdict:
        try:
            await asyncio.sleep(lengths[_index(item)])
        except asyncio.CancelledError:
            stopped.append(_index(item))
            raise
        return _judged(item)

    stopping, cancelled = threading.Event(), threading.Event()
    began = time.monotonic()
    verdicts = asyncio.run(batch_verdicts(_items(4), evaluate, stopping, cancelled, 1.0))
    took = time.monotonic() - began
    assert [v.error for v in verdicts] == [ErrorKind.STATIC_REJECTED] * 2 + [ErrorKind.BATCH_TIMEOUT] * 2
    assert [v.message for v in verdicts[:2]] == ["0", "1"]
    assert all(v.error in NOT_JUDGED and v.reward is None for v in verdicts[2:]), verdicts[2:]
    assert sorted(stopped) == [2, 3]
    assert cancelled.is_set()
    assert took < 3.0, f"answered after {took:.1f} s (limit 1 s)"


def test_an_item_stopped_by_the_service_stop_is_executor_stopped() -> None:
    """The service's stop (``stopping`` set) ends an item with `EvaluationCancelled`: its verdict is
    ``executor_stopped``, and the item judged before keeps its own."""
    stopping, cancelled = threading.Event(), threading.Event()

    async def evaluate(item: EvaluateRequest) -> Verdict:
        if _index(item) == 0:
            return _judged(item)
        await asyncio.sleep(0.1)
        stopping.set()
        raise EvaluationCancelled("the service stopped")

    verdicts = asyncio.run(batch_verdicts(_items(2), evaluate, stopping, cancelled, 30.0))
    assert [v.error for v in verdicts] == [ErrorKind.STATIC_REJECTED, ErrorKind.EXECUTOR_STOPPED]


def test_a_batch_whose_request_is_cancelled_stops_its_items() -> None:
    """The request itself given up (its handler task cancelled, as at a forced shut-down): ``cancelled``
    is set, so an item's work in a thread stops (seen here: the thread's wait on the event ends at once,
    where it would run its 30 s), and the items' coroutines are cancelled."""
    stopping, cancelled = threading.Event(), threading.Event()
    thread_ended: list[float] = []

    def work() -> None:  # what an evaluation does in its thread: steps that check `cancelled`
        began = time.monotonic()
        cancelled.wait(30.0)
        thread_ended.append(time.monotonic() - began)

    async def evaluate(item: EvaluateRequest) -> Verdict:
        await asyncio.to_thread(work)
        return _judged(item)

    async def main() -> None:
        batch = asyncio.ensure_future(batch_verdicts(_items(1), evaluate, stopping, cancelled, 60.0))
        await asyncio.sleep(0.3)
        batch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await batch

    began = time.monotonic()
    asyncio.run(main())  # the loop's end waits for the default executor's thread
    assert cancelled.is_set()
    assert thread_ended and thread_ended[0] < 5.0, thread_ended
    assert time.monotonic() - began < 10.0


def test_every_failed_items_error_is_retrieved() -> None:
    """Two items fail at once: the first error is raised and the other is retrieved too (not logged
    as "Task exception was never retrieved" when its task is collected)."""
    stopping, cancelled = threading.Event(), threading.Event()
    reported: list[dict[str, Any]] = []

    async def evaluate(item: EvaluateRequest) -> Verdict:
        raise ValueError(f"item {_index(item)} failed")

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: reported.append(context))
        with pytest.raises(ValueError, match="failed"):
            await batch_verdicts(_items(3), evaluate, stopping, cancelled, 30.0)
        gc.collect()

    asyncio.run(main())
    assert not reported, [c.get("message") for c in reported]


def test_an_item_dropped_at_its_deadline_is_batch_timeout() -> None:
    """An item that its evaluation dropped unrun because the batch's deadline passed (a replica's or
    the evaluator's `EvaluationExpired`, which may come a moment before the batch's own limit) is a
    ``batch_timeout`` verdict beside the judged ones, not the whole batch's failure (seen failing
    without its clause: the batch raised, a 499 for every item)."""
    from executor.errors import EvaluationExpired

    async def evaluate(item: EvaluateRequest) -> Verdict:
        if _index(item) == 1:
            raise EvaluationExpired("not started: its request's limit passed before it was run")
        return _judged(item)

    verdicts = asyncio.run(batch_verdicts(_items(2), evaluate, threading.Event(), threading.Event(), 10.0))
    assert verdicts[0].error is ErrorKind.STATIC_REJECTED, verdicts[0]
    assert verdicts[1].error is ErrorKind.BATCH_TIMEOUT and verdicts[1].error in NOT_JUDGED, verdicts[1]
    assert verdicts[1].reward is None, verdicts[1]


def test_a_single_evaluation_dropped_at_its_deadline_is_answered_504() -> None:
    """`within_request_limit` answers an evaluation dropped at its deadline as one past the limit: 504
    ``timeout`` (seen failing without its clause: the `EvaluationExpired` went up, a 499)."""
    from executor.app import within_request_limit
    from executor.errors import EvaluationExpired
    from executor.settings import ExecutorSettings

    async def dropped() -> Verdict:
        raise EvaluationExpired("dropped unrun on replica-0: its request's limit passed before it was run")

    answer = asyncio.run(within_request_limit(dropped(), ExecutorSettings(), "evaluation"))
    assert not isinstance(answer, Verdict)
    assert answer.status_code == 504 and b'"timeout"' in answer.body, answer.body
