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
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from executor.errors import ExecutorError

# For each argument ``t:PATH`` (a directory on the way: traversed) or ``r:PATH`` (what is needed:
# read, and traversed when a directory), the argument again, NUL-terminated, when the uid may not.
_PROBE = r"""
for a; do
  p=${a#?:}
  case $a in
    t:*) [ -x "$p" ] || printf '%s\0' "$a" ;;
    *) if [ -d "$p" ]; then [ -r "$p" ] && [ -x "$p" ]; else [ -r "$p" ]; fi || printf '%s\0' "$a" ;;
  esac
done
"""
SHELL = "/bin/sh"
PROBE_TIMEOUT_S = 30.0

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


def unreachable(needed: Sequence[tuple[str, Path]], uid: int, gid: int) -> list[Unreachable]:
    """Those of ``needed`` (a description and a path each; a path that does not exist stands for its
    nearest ancestor that does) that a process of ``uid`` (group ``gid``, no other groups) cannot reach,
    asked as that uid: one ``/bin/sh`` run (a few ms). Links are followed as the kernel follows them:
    the path as named and its real path are both checked."""
    targets: list[tuple[str, Path]] = []
    for what, path in needed:
        found = _existing(path)
        targets += [(what, found)] + ([(what, found.resolve())] if found.resolve() != found else [])
    args: dict[str, None] = {}
    for _, path in targets:
        for parent in reversed(path.parents):
            args[f"t:{parent}"] = None
        args[f"r:{path}"] = None
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
    for what, path in targets:
        if f"r:{path}" not in refused or path in problems:
            continue
        blocker = next((p for p in reversed(path.parents) if f"t:{p}" in refused), None)
        problems[path] = Unreachable(what, path, blocker)
    return list(problems.values())


def interpreter_needs(package: Path, pythonpath: Iterable[str] = ()) -> list[tuple[str, Path]]:
    """What ``python -m`` of this interpreter needs to import ``package`` (the executor's): the
    interpreter, its prefixes, the entries of this process's import path under them (the standard
    library, site-packages), ``pythonpath`` (a worker's ``PYTHONPATH``) and the package itself. Not
    this process's own first entry (its working directory, or its script's: a worker has its own)."""
    needed: list[tuple[str, Path]] = [("the interpreter", Path(sys.executable))]
    prefixes = [Path(p) for p in dict.fromkeys((sys.prefix, sys.base_prefix, sys.exec_prefix))]
    needed += [("the Python installation", p) for p in prefixes]
    installed = [e for e in sys.path if e and any(Path(e) == p or p in Path(e).parents for p in prefixes)]
    for entry in dict.fromkeys([*installed, *pythonpath]):
        if entry and os.path.exists(entry):
            needed.append(("an entry of the import path", Path(entry)))
    needed.append(("the executor's package", package))
    return needed


def refusal(problems: Sequence[Unreachable], who: str, workers: bool = True) -> str:
    """The error for ``problems`` of ``who`` (the workers, the compiles: ``workers`` False): what each
    directory that blocks them keeps from them (the first few), then :data:`WAYS_OUT` (and, for the
    workers, :data:`JAIL_OFF`)."""
    by_blocker: dict[str, list[str]] = {}
    for p in problems:
        where = f"{p.blocker} does not let them through to" if p.blocker else "they may not read"
        by_blocker.setdefault(where, []).append(f"{p.what} {p.path}")
    parts = []
    for where, paths in by_blocker.items():
        more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
        parts.append(f"{where} {', '.join(paths[:3])}{more}")
    return f"{who} cannot reach what they need: {'; '.join(parts)}. {WAYS_OUT}" + (
        f" {JAIL_OFF}" if workers else ""
    )
