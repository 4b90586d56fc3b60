"""What another uid can reach of the host's files: the check behind the ``uid`` protection.

Under ``uid`` (the executor root, namespaces refused: :func:`executor.jail.protection`) a worker runs as
a uid of its own (:func:`executor.sandbox.take_worker_uid`) and a compile as :data:`JAIL_UID`, with no
mount namespace: what they need is opened through the host's real directories, so every directory above
it must let that uid through. A Python installation or an executor cache under a 0700 home (root's
``/root``, the default ``~/.cache/regraph`` of a root executor) fails every worker at its start (the
interpreter cannot be run, or the reference's library cannot be opened: "Permission denied"), and every
compile. :func:`unreachable` asks the kernel, as that uid: one ``/bin/sh`` of that uid tests each path
(``test -r``/``-x``, which the kernel answers with ACLs and the rest counted), so it works where the
interpreter itself is out of reach, and names the first directory on the way that keeps the uid out.
Asked of each path only what its use needs (review 41 L3): an executable (the interpreter) and a
directory only passed through (a cache whose files are opened by name) ``-x``; the rest ``-r`` (and
``-x`` for a directory: an import path entry is listed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from executor.errors import ExecutorError

# For each argument ``t:PATH`` (a directory on the way: traversed), ``x:PATH`` (what is needed: executed,
# or traversed when a directory) or ``r:PATH`` (what is needed: read, and traversed when a directory), the
# argument again, NUL-terminated, when the uid may not.
_PROBE = r"""
for a; do
  p=${a#?:}
  case $a in
    t:*|x:*) [ -x "$p" ] || printf '%s\0' "$a" ;;
    *) if [ -d "$p" ]; then [ -r "$p" ] && [ -x "$p" ]; else [ -r "$p" ]; fi || printf '%s\0' "$a" ;;
  esac
done
"""
SHELL = "/bin/sh"
PROBE_TIMEOUT_S = 30.0
# What :func:`interpreter_needs` calls an entry of a worker's PYTHONPATH that is neither the executor's
# nor in the interpreter's installation: one the uid cannot reach is skipped by Python's import (as if
# absent), so it is warned of, not refused (:func:`split_skippable`).
PYTHONPATH_ENTRY = "an entry of PYTHONPATH"

WAYS_OUT = (
    "Ways out: put them where other users can pass (for the executor's cache, e.g. "
    "REGRAPH_EXECUTOR_CACHE_DIR=/var/cache/regraph-executor; for Python, an installation outside a "
    "private home), or `chmod o+x` the directory named; or run the executor where it may make "
    "namespaces (`unshare --mount --pid --fork true` works: the jail then binds what it needs, whatever "
    "the modes above)."
)
# For the workers only: the way out that gives up their jail.
JAIL_OFF = (
    "REGRAPH_EXECUTOR_JAIL_WORKERS=0 runs the workers without any jail, as the executor's own user (root "
    "here): only for code you trust."
)


class ReachError(ExecutorError):
    """What the ``uid`` protection's processes need is out of their reach: the executor does not start
    (every worker, or every compile, would fail)."""


@dataclass(frozen=True)
class Unreachable:
    """A needed path (``what`` it is) that the uid cannot reach, and the first directory above it that
    it may not pass (None: the path itself is what it may not read)."""

    what: str
    path: Path
    blocker: Path | None


def _existing(path: Path) -> Path:
    """``path``, or its nearest ancestor that exists (a cache directory made later is made there)."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def unreachable(
    needed: Sequence[tuple[str, Path]], uid: int, gid: int, x_only: Collection[Path] = ()
) -> list[Unreachable]:
    """Those of ``needed`` (a description and a path each; a path that does not exist stands for its
    nearest ancestor that does) that a process of ``uid`` (group ``gid``, no other groups) cannot reach,
    asked as that uid: one ``/bin/sh`` run (a few ms). Links are followed as the kernel follows them:
    the path as named and its real path are both checked. A path of ``x_only`` (an executable, a
    directory only passed through) need only be executable; the others readable too."""
    targets: list[tuple[str, Path, str]] = []
    for what, path in needed:
        found = _existing(path)
        mode = "x" if path in x_only else "r"
        targets += [(what, found, mode)] + (
            [(what, found.resolve(), mode)] if found.resolve() != found else []
        )
    args: dict[str, None] = {}
    for _, path, mode in targets:
        for parent in reversed(path.parents):
            args[f"t:{parent}"] = None
        args[f"{mode}:{path}"] = None
    done = subprocess.run(
        [SHELL, "-c", _PROBE, "sh", *args],
        capture_output=True,
        timeout=PROBE_TIMEOUT_S,
        env={"PATH": "/usr/bin:/bin", "LANG": "C"},
        cwd="/",
        user=uid,
        group=gid,
        extra_groups=[],
        check=False,
    )
    if done.returncode != 0:
        raise ReachError(f"the reach check as uid {uid} failed: {done.stderr.decode(errors='replace')[:300]}")
    refused = set(done.stdout.decode(errors="surrogateescape").split("\0")) - {""}
    problems: dict[Path, Unreachable] = {}
    for what, path, mode in targets:
        if f"{mode}:{path}" not in refused or path in problems:
            continue
        blocker = next((p for p in reversed(path.parents) if f"t:{p}" in refused), None)
        problems[path] = Unreachable(what, path, blocker)
    return list(problems.values())


INTERPRETER = "the interpreter"
# What the executor's cache is called among the needs (only passed through: its files opened by name).
CACHE = "the executor's cache"


def interpreter_needs(package: Path, pythonpath: Iterable[str] = ()) -> list[tuple[str, Path]]:
    """What ``python -m`` of this interpreter needs to import ``package`` (the executor's): the
    interpreter, its prefixes, the entries of this process's import path under them (the standard
    library, site-packages), ``pythonpath`` (a worker's ``PYTHONPATH``) and the package itself. Not
    this process's own first entry (its working directory, or its script's: a worker has its own).
    An entry of ``pythonpath`` that neither holds ``package`` nor lies in the installation is a
    :data:`PYTHONPATH_ENTRY` (:func:`split_skippable`)."""
    needed: list[tuple[str, Path]] = [(INTERPRETER, Path(sys.executable))]
    prefixes = [Path(p) for p in dict.fromkeys((sys.prefix, sys.base_prefix, sys.exec_prefix))]
    needed += [("the Python installation", p) for p in prefixes]

    def installed(entry: str) -> bool:
        return any(Path(entry) == p or p in Path(entry).parents for p in prefixes)

    ours = [e for e in sys.path if e and installed(e)]
    for entry in dict.fromkeys([*ours, *pythonpath]):
        if entry and os.path.exists(entry):
            path = Path(os.path.abspath(entry))
            own = installed(entry) or path in package.parents or path.resolve() in package.resolve().parents
            needed.append(("an entry of the import path" if own else PYTHONPATH_ENTRY, Path(entry)))
    needed.append(("the executor's package", package))
    return needed


def x_only(needed: Iterable[tuple[str, Path]]) -> set[Path]:
    """The paths of ``needed`` that need only be executable (:func:`unreachable`'s ``x_only``): the
    interpreter (execve(2) asks no more) and the executor's caches (their files are opened by name)."""
    return {path for what, path in needed if what in (INTERPRETER, CACHE)}


def split_skippable(problems: Iterable[Unreachable]) -> tuple[list[Unreachable], list[Unreachable]]:
    """``problems`` split into those that stop a worker and the :data:`PYTHONPATH_ENTRY` ones, which
    Python's import skips (an entry it cannot list is as if absent): a warning, not a refusal (review 41
    L3). What a worker would have imported from one is found missing by its start-up probe."""
    stopping = [p for p in problems if p.what != PYTHONPATH_ENTRY]
    return stopping, [p for p in problems if p.what == PYTHONPATH_ENTRY]


def refusal(problems: Sequence[Unreachable], who: str, workers: bool = True) -> str:
    """The error for ``problems`` of ``who`` (the workers, the compiles: ``workers`` False): what each
    directory that blocks them keeps from them (the first few), then :data:`WAYS_OUT` (and, for the
    workers, :data:`JAIL_OFF`)."""
    return f"{who} cannot reach what they need: {blockers(problems)}. {WAYS_OUT}" + (
        f" {JAIL_OFF}" if workers else ""
    )


def blockers(problems: Sequence[Unreachable]) -> str:
    """What each directory that blocks ``problems`` keeps out (the first few of each)."""
    by_blocker: dict[str, list[str]] = {}
    for p in problems:
        where = f"{p.blocker} does not let them through to" if p.blocker else "they may not read"
        by_blocker.setdefault(where, []).append(f"{p.what} {p.path}")
    parts = []
    for where, paths in by_blocker.items():
        more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
        parts.append(f"{where} {', '.join(paths[:3])}{more}")
    return "; ".join(parts)
