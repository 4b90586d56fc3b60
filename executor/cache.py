"""A content-addressed cache of build products (.so, .cubin) shared by threads and processes."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

DEFAULT_CACHE_DIR = Path(
    os.environ.get("REGRAPH_EXECUTOR_CACHE_DIR", Path.home() / ".cache/regraph/executor")
)


def content_key(*parts: str) -> str:
    """A stable hash of everything that determines a build product (sources, flags, tool versions)."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8")
        # Length-prefix each part so that ("ab", "c") and ("a", "bc") hash differently.
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()[:32]


def cached_product(
    cache_dir: Path, key: str, suffix: str, build: Callable[[Path, Path], None]
) -> tuple[Path, bool]:
    """Return ``(path, hit)`` for the product named by ``key``, building it if absent.

    ``build(workdir, output)`` writes ``output`` inside a private temporary directory; the result is
    moved into place with an atomic rename, so concurrent builders never see a half-written file and
    the last one to finish simply replaces an identical product.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / f"{key}{suffix}"
    if target.exists():
        return target, True
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=f".build-{key[:8]}-") as tmp:
        work = Path(tmp)
        output = work / f"product{suffix}"
        build(work, output)
        os.replace(output, target)
    return target, False
