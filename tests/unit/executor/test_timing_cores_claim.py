"""The automatic timing cores are the host's to give once (review 45's F3): processes that see the same
CPUs would each reserve the same last ones. Real processes here, each resolving the executor's split of
the same 16 CPUs (named, not the machine's: the claim files name the CPUs, nothing is pinned), with one
lock directory: the first holds the claim for its life, a second started beside it gets no split, a
third after the first exits gets it; a value set by hand keeps its split; disjoint shares never meet."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from executor.fleet.pinning import TIMING_CORES_ENV, executor_split
from executor.gpulock import LOCK_DIR_ENV

# Resolve the split of CPUs 0-15 (or the ones given), print it, then hold until stdin closes.
RESOLVE = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from executor.fleet.pinning import executor_split
first, last = int(sys.argv[1]), int(sys.argv[2])
split = executor_split(allowed=range(first, last + 1))
print(split.encode() if split else "none", flush=True)
sys.stdin.read()
"""


class Resolver:
    """A process that resolved the executor's split and holds whatever it claimed until :meth:`exit`."""

    def __init__(self, locks: Path, cpus: tuple[int, int] = (0, 15), count: str = "") -> None:
        env = {**os.environ, LOCK_DIR_ENV: str(locks), TIMING_CORES_ENV: count}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", RESOLVE, *map(str, cpus)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        assert self.proc.stdout is not None
        self.split = self.proc.stdout.readline().strip()

    def exit(self) -> str:
        """Let it end; its log."""
        _, err = self.proc.communicate(timeout=30)
        return err


def test_a_second_process_on_the_same_cpus_gets_no_automatic_split(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    first = Resolver(locks)
    try:
        assert first.split == "0-13;14-15"  # automatic: 2 of 16
        second = Resolver(locks)
        assert second.split == "none"
        log = second.exit()
        assert "reserved by another process" in log and log.count("timing cores: CPU") == 1
        # a value set by hand keeps its split (and says it shares it)
        manual = Resolver(locks, count="2")
        assert manual.split == "0-13;14-15"
        assert "both processes' trials share it" in manual.exit()
        # another share of the host's CPUs (a pinned replica's) claims its own
        other = Resolver(locks, cpus=(16, 31))
        assert other.split == "16-29;30-31"
        other.exit()
    finally:
        first.exit()
    third = Resolver(locks)
    try:
        assert third.split == "0-13;14-15"
    finally:
        third.exit()


def test_the_claim_is_this_process_s_for_its_life(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In one process (an executor's many workers and builds) the same split is answered every time."""
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setenv(TIMING_CORES_ENV, "")
    cpus = range(100, 116)  # CPUs no other test claims
    first = executor_split(allowed=cpus)
    assert first is not None and first.reserved == (114, 115)
    assert executor_split(allowed=cpus) == first
    other = Resolver(tmp_path / "locks", cpus=(100, 115))
    assert other.split == "none"
    other.exit()
