"""The jobs page's task choices: the task library is listed once, not on every page, and listed again
when a task is added, removed or finishes being copied in (a real directory; its mtime is what tells)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from api.optimize.ui import SETTLED_NS, task_ids

LONG_AGO_NS = time.time_ns() - 3600 * 1_000_000_000


def _task(root: Path, name: str) -> Path:
    (root / name).mkdir()
    (root / name / "task.json").write_text("{}")
    return root / name


def _settle(path: Path) -> None:
    """Date the directory's last change an hour back: older than the racy window of a file-time tick."""
    os.utime(path, ns=(LONG_AGO_NS, LONG_AGO_NS))


def test_the_library_is_listed_once_while_the_directory_is_unchanged(tmp_path: Path) -> None:
    library = tmp_path / "tasks"
    library.mkdir()
    first = _task(library, "a")
    _task(library, "b")
    (library / "README.md").write_text("not a task")
    _settle(library)
    assert task_ids(library) == ["a", "b"]
    # A change inside a task's own folder leaves the library's mtime as it was: a page that listed the
    # library again would see that `a` lost its task.json; the kept listing does not look.
    (first / "task.json").unlink()
    assert task_ids(library) == ["a", "b"]
    assert task_ids(library) == ["a", "b"]


def test_a_task_added_shows_without_a_restart(tmp_path: Path) -> None:
    library = tmp_path / "tasks"
    library.mkdir()
    _task(library, "a")
    _settle(library)
    assert task_ids(library) == ["a"]
    _task(library, "c")  # the library's mtime moves on
    assert task_ids(library) == ["a", "c"]
    (library / "c" / "task.json").unlink()
    (library / "c").rmdir()
    assert task_ids(library) == ["a"]


def test_a_task_being_copied_in_shows_once_its_task_json_is_there(tmp_path: Path) -> None:
    library = tmp_path / "tasks"
    library.mkdir()
    _task(library, "a")
    (library / "d").mkdir()  # copied folder first, its files after
    _settle(library)
    assert task_ids(library) == ["a"]
    (library / "d" / "task.json").write_text("{}")  # the library's mtime does not move
    assert task_ids(library) == ["a", "d"]


def test_a_listing_made_within_the_racy_window_is_not_kept(tmp_path: Path) -> None:
    library = tmp_path / "tasks"
    library.mkdir()
    first = _task(library, "a")
    _task(library, "b")
    now = time.time_ns()
    os.utime(library, ns=(now, now))  # changed just now: a later change may carry the same mtime
    assert time.time_ns() - now < SETTLED_NS
    assert task_ids(library) == ["a", "b"]
    (first / "task.json").unlink()
    assert task_ids(library) == ["b"]


def test_no_library_no_tasks(tmp_path: Path) -> None:
    assert task_ids(None) == []
    assert task_ids(tmp_path / "missing") == []
    (tmp_path / "file").write_text("")
    assert task_ids(tmp_path / "file") == []
