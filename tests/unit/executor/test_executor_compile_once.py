"""Two requests for the same build at once (two evaluations of one candidate, two executors of a host over
one cache) build it once: the second waits for the build under way and is answered from the cache. A
waiter whose evaluation is given up meanwhile stops waiting at once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from executor.compile import Compiler
from executor.errors import EvaluationCancelled
from executor.verdict import CompileResult

# A function-task library: nvcc takes seconds, so two requests started together overlap.
SOURCE = 'extern "C" void halve(int n, float* x) { for (int i = 0; i < n; ++i) x[i] *= 0.5f; }\n'


def test_two_requests_for_one_build_at_once_build_it_once_and_a_given_up_waiter_leaves(
    tmp_path: Path,
) -> None:
    # Two compilers over one cache, as two executors of a host (or two threads of one) have.
    compilers = [Compiler(tmp_path, choice="nvcc"), Compiler(tmp_path, choice="nvcc")]
    start = threading.Barrier(2)
    results: list[CompileResult] = []

    def build(compiler: Compiler) -> None:
        start.wait()
        results.append(compiler.compile_source(SOURCE, "shared_library"))

    threads = [threading.Thread(target=build, args=(c,)) for c in compilers]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while not list((tmp_path / "candidates").glob(".build-*")):  # the build under way, in its directory
        assert any(t.is_alive() for t in threads), "the build ended before a third request could wait"
        assert time.monotonic() < deadline, "the build never started"
        time.sleep(0.01)
    # A third request for it, given up (its caller gone): it stops waiting at once, not after the build.
    given_up = threading.Event()
    given_up.set()
    started = time.monotonic()
    with pytest.raises(EvaluationCancelled):
        compilers[0].compile_source(SOURCE, "shared_library", stop=given_up)
    waited = time.monotonic() - started
    for thread in threads:
        thread.join(120)
    assert len(results) == 2 and all(r.ok for r in results), [r.log for r in results]
    # One of them ran nvcc; the other waited for it and took its product from the cache.
    assert sorted(r.cache_hit for r in results) == [False, True], results
    assert results[0].product == results[1].product
    assert waited < 1.0, waited
