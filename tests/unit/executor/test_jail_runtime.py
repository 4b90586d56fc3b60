"""The parts of the jail (executor.jail, executor.jail_init) that the runtime jail of candidate workers
adds: an init that keeps the command from being PID 1, paths that must exist, private tmpfs mounts."""

from __future__ import annotations

from pathlib import Path

import pytest

from executor import jail

pytestmark = pytest.mark.skipif(jail.protection() != "namespace", reason="no namespaces on this host")


def _run(box: jail.Jail, script: str, tmp_path: Path) -> tuple[int | None, str]:
    return box.run(["/bin/sh", "-c", script], tmp_path, timeout_s=60, forced="namespace")


def test_under_its_init_a_command_can_die_from_its_own_signal(tmp_path: Path) -> None:
    """As PID 1 a process ignores the signals it sends itself without a handler (abort() then faults);
    as the init's child it dies from them, reported as 128 + N."""
    box = jail.Jail(read_only=jail.HOST_PATHS, init=True)
    code, out = _run(box, "kill -ABRT $$; echo survived", tmp_path)
    assert code == 128 + 6, out
    assert "survived" not in out


def test_a_missing_required_path_fails_the_jail(tmp_path: Path) -> None:
    box = jail.Jail(read_only=jail.HOST_PATHS, required=[str(tmp_path / "missing")])
    code, out = _run(box, "echo ran", tmp_path)
    assert code == 125
    assert out.startswith("jail: ") and "required path is missing" in out and "ran" not in out


def test_tmpfs_mounts_are_private_and_empty(tmp_path: Path) -> None:
    box = jail.Jail(read_only=jail.HOST_PATHS, tmpfs=["/dev/shm"])
    code, out = _run(box, "ls -A /dev/shm | wc -l; echo x > /dev/shm/f && cat /dev/shm/f", tmp_path)
    assert code == 0, out
    assert out.split() == ["0", "x"]
    assert not Path("/dev/shm/f").exists()


def test_a_command_runs_with_no_new_privileges(tmp_path: Path) -> None:
    """The child's no-new-privileges bit is set between fork and exec through the prctl looked up in
    the parent (`executor.jail._PRCTL`): no dlopen in the child of a threaded parent."""
    from executor.jail import _run_group

    code, out = _run_group(["cat", "/proc/self/status"], tmp_path, 10.0, 0, {"PATH": "/usr/bin:/bin"}, None)
    assert code == 0, out
    assert "NoNewPrivs:\t1" in out, out
