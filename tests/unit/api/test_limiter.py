"""The limiter every face shares (api/limits.py): per-key refusals, a bounded wait for a slot in all,
a slot held until its thread really ends, and a call given up calling its abandon hook at once."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from api.limits import KeyBusyError, Limiter, OverTimeError, ServerBusyError, SlotLimit
from api.settings import ApiSettings


def limiter(total: int = 3, per_key: int = 2, wait_s: float = 0.2) -> Limiter:
    return Limiter(
        {"cypher": SlotLimit(total, per_key, wait_s), "evaluation": SlotLimit(total, per_key, wait_s)}
    )


def test_a_key_past_its_share_is_refused_and_all_keys_past_the_total_wait_then_503() -> None:
    slots = limiter()
    held = [slots.take("evaluation", "a"), slots.take("evaluation", "a")]
    with pytest.raises(KeyBusyError, match="already runs 2 evaluations"):
        slots.take("evaluation", "a")
    held.append(slots.take("evaluation", "b"))
    started = time.monotonic()
    with pytest.raises(ServerBusyError, match="already runs 3 evaluations"):
        anyio.run(slots.acquire, "evaluation", "c")
    assert time.monotonic() - started >= 0.2
    assert slots.running("cypher") == 0  # kinds are counted apart
    held[0].release()
    held[0].release()  # once only
    assert slots.running("evaluation") == 2 and slots.running("evaluation", "a") == 1
    anyio.run(slots.acquire, "evaluation", "c")


def test_a_slot_is_held_until_its_thread_ends_and_abandon_is_called_at_once() -> None:
    slots = limiter(wait_s=0)
    release = threading.Event()
    abandoned = threading.Event()

    def stuck() -> str:
        release.wait(10)
        return "late"

    def abandon() -> None:
        abandoned.set()

    async def scenario() -> None:
        with pytest.raises(OverTimeError, match=r"no answer within 0\.3 s"):
            await slots.run_in_thread("cypher", "k", stuck, limit_s=0.3, abandon=abandon)
        assert abandoned.is_set()
        assert slots.running("cypher", "k") == 1  # the thread still runs: its slot is still taken
        release.set()
        for _ in range(500):  # the thread ends within moments of its release
            if not slots.running("cypher"):
                break
            await anyio.sleep(0.01)
        assert slots.running("cypher") == 0
        assert await slots.run_in_thread("cypher", "k", lambda: "ok", limit_s=5) == "ok"
        with pytest.raises(ZeroDivisionError):
            await slots.run_in_thread("cypher", "k", lambda: 1 // 0, limit_s=5)
        assert slots.running("cypher") == 0

    anyio.run(scenario)


def test_the_app_limiter_comes_from_the_settings() -> None:
    settings = ApiSettings(
        cypher_max_concurrent=5,
        cypher_max_concurrent_per_key=3,
        evaluation_max_concurrent=6,
        evaluation_max_concurrent_per_key=1,
        slot_wait_s=2,
    )
    made = Limiter.from_settings(settings)
    assert made.limits == {"cypher": SlotLimit(5, 3, 2.0), "evaluation": SlotLimit(6, 1, 2.0)}
