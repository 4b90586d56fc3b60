"""The Neo4j JVM's class-data archive (issue 31: ~30 % of the JVM's start-up CPU): used when it
exists, written by one JVM at a time when it does not, and kept only after a clean exit."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from graphdb.embedded import (
    ARCHIVE_MARKER_STALE_S,
    EmbeddedConfig,
    EmbeddedNeo4j,
    class_archive,
    class_archive_options,
    java_executable,
    launcher_classpath,
)


def test_an_existing_archive_is_used(tmp_path: Path) -> None:
    archive = tmp_path / "neo4j-classes-x.jsa"
    archive.write_bytes(b"archive")
    options, pending = class_archive_options(archive)
    assert f"-XX:SharedArchiveFile={archive}" in options
    assert pending is None


def test_one_jvm_at_a_time_writes_a_missing_archive(tmp_path: Path) -> None:
    archive = tmp_path / "neo4j-classes-x.jsa"
    options, pending = class_archive_options(archive)
    assert pending is not None and options[0] == f"-XX:ArchiveClassesAtExit={pending}"
    assert class_archive_options(archive) == ([], None)  # a second start meanwhile: plain
    marker = archive.with_suffix(".writing")
    old = time.time() - ARCHIVE_MARKER_STALE_S - 1
    os.utime(marker, (old, old))  # left by a crash long ago
    assert class_archive_options(archive)[1] is not None


def test_off_with_the_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGRAPH_NEO4J_CDS", "0")
    assert class_archive_options(tmp_path / "a.jsa") == ([], None)


@pytest.mark.parametrize(("returncode", "kept"), [(0, True), (-9, False), (1, False)])
def test_the_written_archive_is_kept_only_after_a_clean_exit(
    tmp_path: Path, returncode: int, kept: bool
) -> None:
    archive = tmp_path / "neo4j-classes-x.jsa"
    _, pending = class_archive_options(archive)
    assert pending is not None
    pending.write_bytes(b"dumped")
    server = EmbeddedNeo4j(EmbeddedConfig(home=tmp_path / "home"))
    server._archive, server._pending_archive = archive, pending
    server._keep_class_archive(returncode)
    assert archive.exists() is kept
    assert not pending.exists()
    assert not archive.with_suffix(".writing").exists()  # the next start may write it


def test_the_archive_is_per_java_and_the_class_path_uses_the_launcher_jar(tmp_path: Path) -> None:
    java = java_executable()
    assert class_archive(tmp_path, java).parent == tmp_path
    assert class_archive(tmp_path, java) == class_archive(tmp_path, java)
    assert launcher_classpath(tmp_path).startswith(str(tmp_path / "classes"))
    (tmp_path / "regraph-neo4j-launcher-0.1.0.jar").write_bytes(b"")
    assert launcher_classpath(tmp_path).startswith(str(tmp_path / "regraph-neo4j-launcher-0.1.0.jar"))
