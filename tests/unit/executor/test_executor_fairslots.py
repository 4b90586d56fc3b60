"""One caller cannot hold every evaluation slot of an executor (issue 27: two 180 s compiles of one
reader held both slots and everyone waited)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from executor.fairslots import FairSlots


def test_one_caller_leaves_a_slot_for_another() -> None:
    async def scenario() -> list[str]:
        slots = FairSlots(2)
        order: list[str] = []
        await slots.acquire("reader-a")
        second_a = asyncio.ensure_future(slots.acquire("reader-a"))
        await asyncio.sleep(0)
        assert not second_a.done(), "a caller took more than half of the slots"
        await asyncio.wait_for(slots.acquire("reader-b"), timeout=1)
        order.append("b got a slot while a held one")
        assert slots.in_use == 2 and slots.held_by("reader-a") == 1
        slots.release("reader-a")
        await asyncio.wait_for(second_a, timeout=1)
        order.append("a's second ran once its first ended")
        assert slots.held_by("reader-a") == 1 and slots.held_by("reader-b") == 1
        return order

    assert len(asyncio.run(scenario())) == 2


def test_a_cancelled_wait_takes_no_slot_and_waiters_keep_their_order() -> None:
    async def scenario() -> None:
        slots = FairSlots(2)
        await slots.acquire("a")
        await slots.acquire("b")
        gone = asyncio.ensure_future(slots.acquire("c"))
        later = asyncio.ensure_future(slots.acquire("d"))
        await asyncio.sleep(0)
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        slots.release("a")
        await asyncio.wait_for(later, timeout=1)
        assert slots.held_by("c") == 0 and slots.held_by("d") == 1 and slots.in_use == 2

    asyncio.run(scenario())


def test_a_slot_is_held_until_the_thread_ends_even_when_its_request_is_cancelled() -> None:
    async def scenario() -> None:
        slots = FairSlots(1)
        release = threading.Event()
        with ThreadPoolExecutor(1) as pool:
            running = asyncio.ensure_future(slots.run("a", pool, release.wait, 5))
            await asyncio.sleep(0.05)
            running.cancel()
            await asyncio.sleep(0.05)
            assert slots.in_use == 1, "the slot was given back while its thread still ran"
            release.set()
            for _ in range(100):
                if slots.in_use == 0:
                    break
                await asyncio.sleep(0.01)
            assert slots.in_use == 0

    asyncio.run(scenario())


def test_requests_without_a_caller_may_take_every_slot_but_leave_them_to_waiters() -> None:
    async def scenario() -> None:
        slots = FairSlots(2)
        await slots.acquire(None)
        await asyncio.wait_for(slots.acquire(None), timeout=1)  # a lone batch keeps both
        keyed = asyncio.ensure_future(slots.acquire("key-1"))
        third = asyncio.ensure_future(slots.acquire(None))
        await asyncio.sleep(0)
        slots.release(None)
        await asyncio.wait_for(keyed, timeout=1)  # first come, first served
        assert not third.done() and slots.held_by("key-1") == 1
        third.cancel()

    asyncio.run(scenario())


def test_a_call_that_ends_after_its_loop_closed_logs_no_error(caplog: pytest.LogCaptureFixture) -> None:
    """A service stopped while an evaluation still runs in its thread: the call's end finds the loop
    closed, and the slot it would give back went with the loop (CI of stop 48 logged "exception calling
    callback ... Event loop is closed" from concurrent.futures)."""
    release = threading.Event()
    pool = ThreadPoolExecutor(max_workers=1)

    async def scenario() -> None:
        slots = FairSlots(1)
        running = asyncio.ensure_future(slots.run("a", pool, release.wait, 10.0))
        await asyncio.sleep(0.05)
        running.cancel()  # the request given up; its thread runs on

    try:
        asyncio.run(scenario())  # closes the loop
        release.set()
        pool.shutdown(wait=True)
    finally:
        release.set()
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text
