"""The ``uid`` protection's reach check (executor.reach), run for real as the uids it asks about.

Under ``uid`` (the executor root, namespaces refused) workers and compiles run as other uids with no
mount namespace: what they need is opened through the host's directories. An executor cache or a Python
installation under a 0700 directory (a root executor's ``~/.cache``) crashed every candidate with
"worker exited with status 1 during startup without a result". The executor now asks, as a worker's
uid, at its start, and refuses to start, naming the directory; its workers never fall back to running
as root. Each test makes its own closed directory (0700, under the temporary directory) rather than
relying on the host's home.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import executor
from executor import sandbox
from executor.cache import DEFAULT_CACHE_DIR
from executor.errors import WorkerError
from executor.evaluate import Evaluator
from executor.jail import JAIL_UID, is_root, protection
from executor.reach import (
    CACHE,
    INTERPRETER,
    PYTHONPATH_ENTRY,
    ReachError,
    interpreter_needs,
    split_skippable,
    unreachable,
    x_only,
)
from executor.sandbox import JAIL_EXTRA_ENV, JAIL_WORKERS_ENV, take_worker_uid, worker_protection
from executor.settings import ExecutorSettings

pytestmark = pytest.mark.skipif(not is_root(), reason="other uids: the executor must be root")


@pytest.fixture
def dirs() -> Iterator[tuple[Path, Path]]:
    """A closed directory (0700: no other uid passes) and an open one (0755), each holding ``cache``;
    removed after."""
    top = Path(tempfile.mkdtemp(prefix="regraph-test-reach-"))
    top.chmod(0o755)
    closed, opened = top / "closed", top / "open"
    for d, mode in ((closed, 0o700), (opened, 0o755)):
        (d / "cache").mkdir(parents=True)
        d.chmod(mode)
    yield closed, opened
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def uid_protection(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No namespaces (``REGRAPH_JAIL=off``: the executor's protection is ``uid``), and the process's
    probes of the workers' protection and reach forgotten before and after."""
    monkeypatch.setenv("REGRAPH_JAIL", "off")
    for name in ("_probed", "_refused", "_reached"):
        monkeypatch.setattr(sandbox, name, {})
    monkeypatch.setattr(sandbox, "_reach_dirs", dict(sandbox._reach_dirs))
    protection.cache_clear()
    yield
    protection.cache_clear()


def test_the_check_names_the_directory_that_keeps_the_uid_out(dirs: tuple[Path, Path]) -> None:
    closed, opened = dirs
    uid, held = take_worker_uid()
    try:
        problems = unreachable(
            [
                ("the cache", closed / "cache"),
                ("the other cache", opened / "cache"),
                ("one to be", closed / "x"),
            ],
            uid,
            JAIL_UID,
        )
    finally:
        held.close()
    assert [(p.what, p.path, p.blocker) for p in problems] == [
        ("the cache", closed / "cache", closed),
        ("one to be", closed, None),  # not made yet: its parent, which the uid may not read
    ]


def test_the_executors_own_first_import_path_entry_is_not_asked_for(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor started from a directory others may not pass (its working directory, first on its
    import path): a worker has a working directory of its own and never needs it; no refusal for it."""
    closed, _ = dirs
    monkeypatch.syspath_prepend(str(closed / "cache"))
    needed = interpreter_needs(Path(executor.__file__).parent, [str(Path(executor.__file__).parent.parent)])
    assert not [p for _, p in needed if p == closed / "cache" or closed in p.parents], needed
    assert ("the executor's package", Path(executor.__file__).parent) in needed


def test_an_executor_whose_workers_cannot_reach_its_cache_does_not_start(
    dirs: tuple[Path, Path], uid_protection: None
) -> None:
    """Before, it started, and every candidate's worker then died at its start."""
    closed, _ = dirs
    with pytest.raises(ReachError) as refused:
        Evaluator(ExecutorSettings(cache_dir=closed / "cache", runtime="host", prewarm_workers=False))
    message = str(refused.value)
    assert f"{closed} does not let them through to the executor's cache {closed / 'cache'}" in message, (
        message
    )
    assert "REGRAPH_EXECUTOR_CACHE_DIR=" in message and "chmod o+x" in message, message


def test_an_executor_whose_compiles_cannot_reach_its_build_directories_does_not_start(
    dirs: tuple[Path, Path], uid_protection: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compile jail's uid (65534) builds under the cache (``candidates``, ``reference``): the same
    check, as that uid, with the workers' jail off (its check not made)."""
    closed, _ = dirs
    monkeypatch.setenv(JAIL_WORKERS_ENV, "0")
    with pytest.raises(ReachError) as refused:
        Evaluator(ExecutorSettings(cache_dir=closed / "cache", runtime="host", prewarm_workers=False))
    message = str(refused.value)
    assert message.startswith(f"the compiles (as uid {JAIL_UID}"), message
    assert f"{closed} does not let them through to the build directory's parent" in message, message
    assert "REGRAPH_EXECUTOR_JAIL_WORKERS" not in message, message


def test_an_import_path_entry_out_of_reach_is_warned_of_not_refused(
    dirs: tuple[Path, Path],
    uid_protection: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Review 41 L3: a PYTHONPATH entry in the closed directory refused the ``uid`` protection (this test
    asserted that refusal until then), though Python skips an entry it cannot list and the workers
    would have run. Now it is logged, not among what stops the workers."""
    closed, _ = dirs
    monkeypatch.setenv("PYTHONPATH", f"{closed / 'cache'}")
    with caplog.at_level(logging.WARNING, logger="executor.sandbox"):
        problems = sandbox.worker_reach()
    assert not [p for p in problems if p.path == closed / "cache" or closed in p.path.parents], problems
    said = " ".join(r.getMessage() for r in caplog.records)
    assert f"{closed} does not let them through to {PYTHONPATH_ENTRY} {closed / 'cache'}" in said, said


def test_the_entry_that_holds_the_executors_package_must_be_reached(dirs: tuple[Path, Path]) -> None:
    """Unlike another entry, the one the executor's package is imported from (and the installation's)
    stops the workers where their uid cannot reach it."""
    closed, opened = dirs
    package = closed / "lib" / "executor"
    package.mkdir(parents=True)
    (opened / "lib").mkdir()
    needed = interpreter_needs(package, [str(closed / "lib"), str(opened / "lib")])
    assert ("an entry of the import path", closed / "lib") in needed, needed
    assert (PYTHONPATH_ENTRY, opened / "lib") in needed, needed
    uid, held = take_worker_uid()
    try:
        stopping, _ = split_skippable(unreachable(needed, uid, JAIL_UID, x_only(needed)))
    finally:
        held.close()
    assert {p.path for p in stopping} >= {closed / "lib", package}, stopping


def test_the_default_cache_is_checked_only_where_it_is_used(
    dirs: tuple[Path, Path], uid_protection: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 41 L3: the default cache (under root's 0700 home here) was always checked, so an executor
    given another cache, which its workers reach, was refused for the default's."""
    _, opened = dirs
    monkeypatch.setattr(sandbox, "_reach_dirs", {})
    sandbox.need_reach(opened / "cache")
    caches = [p.path for p in sandbox.worker_reach() if p.what == CACHE]
    assert caches == [], caches
    if not unreachable([(CACHE, DEFAULT_CACHE_DIR)], JAIL_UID, JAIL_UID, {DEFAULT_CACHE_DIR}):
        return  # the default one is within reach here: nothing more to show
    sandbox.need_reach(DEFAULT_CACHE_DIR)  # an evaluator that uses it
    assert DEFAULT_CACHE_DIR in [p.path for p in sandbox.worker_reach() if p.what == CACHE]


def test_what_is_only_executed_or_passed_through_need_not_be_readable(dirs: tuple[Path, Path]) -> None:
    """Review 41 L3: the interpreter was asked ``-r`` (execve(2) asks ``-x`` only) and so was a cache
    directory, whose files are opened by name. A 0711 executable and a 0711 directory: reached where
    only ``-x`` is asked, not where ``-r`` is."""
    _, opened = dirs
    program, directory = opened / "python", opened / "cache"
    shutil.copy(shutil.which("true") or "/bin/true", program)
    program.chmod(0o711)
    directory.chmod(0o711)
    needed = [(INTERPRETER, program), (CACHE, directory)]
    assert x_only(needed) == {program, directory}
    assert unreachable(needed, JAIL_UID, JAIL_UID, x_only(needed)) == []
    assert {p.path for p in unreachable(needed, JAIL_UID, JAIL_UID)} == {program, directory}


class _CountedProbes:
    """The real start-up probe (``sandbox._probe``), counted."""

    def __init__(self) -> None:
        self.made = 0
        self.real = sandbox._probe

    def __call__(self, *args: Any) -> tuple[bool, str]:
        self.made += 1
        return self.real(*args)


@pytest.fixture
def probes_forgotten(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's probes of the workers' protection and reach forgotten before and after (the host's
    jail as it is)."""
    for name in ("_probed", "_refused", "_reached"):
        monkeypatch.setattr(sandbox, name, {})
    monkeypatch.setattr(sandbox, "_reach_dirs", dict(sandbox._reach_dirs))
    yield


@pytest.mark.skipif(protection() != "namespace", reason="no namespaces on this host")
def test_a_refusal_after_a_failed_probe_is_probed_again_later(
    dirs: tuple[Path, Path], probes_forgotten: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 41 L2: a refusal was kept for the process's life, so one probe that failed (its 120 s under
    load, the GPU busy) left the executor unusable until a restart. Here the probes fail for real: the
    namespace jail's for a required bind that is missing (test_worker_jail.py's way), the uid workers'
    (where they reach their interpreter: else the reach check refuses them) for a ``numpy`` on their
    import path that cannot be imported. Then the causes go: the refusal stands for
    :data:`sandbox.REFUSAL_RETRY_S` without a probe, then the probes are made again and the jail passes."""
    _, opened = dirs
    missing = opened / "extra"
    monkeypatch.setenv(JAIL_EXTRA_ENV, str(missing))
    broken = opened / "cache" / "numpy.py"
    broken.write_text('raise ImportError("made to fail by the test")\n')
    monkeypatch.setenv("PYTHONPATH", str(broken.parent))
    monkeypatch.setattr(sandbox, "REFUSAL_RETRY_S", 4.0, raising=False)
    probes = _CountedProbes()
    monkeypatch.setattr(sandbox, "_probe", probes)
    with pytest.raises(WorkerError) as refused:
        worker_protection("host")
    message = str(refused.value)
    assert "namespace: " in message and "a required path is missing" in message, message
    made = probes.made
    assert made >= 1
    broken.unlink()
    missing.mkdir()
    with pytest.raises(WorkerError):  # within the backoff: refused again, no probe
        worker_protection("host")
    assert probes.made == made
    time.sleep(4.2)
    assert worker_protection("host") == "namespace"
    assert probes.made == made + 1
    assert "probed again from 4s on" in message, message


def test_a_refusal_of_the_reach_check_alone_stands(
    dirs: tuple[Path, Path], uid_protection: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reach check's refusal (the host's directories: the same on every try) is kept without a
    backoff: neither the check nor a probe is made again for it."""
    closed, _ = dirs
    sandbox.need_reach(closed / "cache")
    monkeypatch.setattr(sandbox, "REFUSAL_RETRY_S", 0.0, raising=False)
    probes = _CountedProbes()
    monkeypatch.setattr(sandbox, "_probe", probes)
    checks: list[int] = []
    reach = sandbox.worker_reach
    monkeypatch.setattr(sandbox, "worker_reach", lambda: checks.append(1) or reach())
    for _ in range(2):
        with pytest.raises(WorkerError) as refused:
            worker_protection("host")
        assert f"{closed} does not let them through to the executor's cache" in str(refused.value)
        assert "probed again" not in str(refused.value)
    assert probes.made == 0 and len(checks) == 1
