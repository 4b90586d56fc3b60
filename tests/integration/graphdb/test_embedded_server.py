"""The embedded Neo4j server and the migration runner, against a real server of this module's own."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from neo4j import GraphDatabase
from neo4j.exceptions import AuthError

from graphdb import queries
from graphdb.connection import Neo4jTarget, open_driver, readiness
from graphdb.embedded import EmbeddedConfig, EmbeddedNeo4j, free_port, port_is_free, wait_for_port_release
from graphdb.errors import JavaNotFoundError, MavenNotFoundError, MigrationChecksumError, PortInUseError
from graphdb.migrations import MIGRATIONS_DIR, MigrationRunner, discover


@pytest.fixture(scope="module")
def own_config(tmp_path_factory: pytest.TempPathFactory) -> EmbeddedConfig:
    return EmbeddedConfig(home=tmp_path_factory.mktemp("own-neo4j"), port=free_port(), pagecache_mb=64)


@pytest.fixture(scope="module")
def own_server(own_config: EmbeddedConfig) -> Iterator[EmbeddedNeo4j]:
    server = EmbeddedNeo4j(own_config)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_server_answers_with_generated_password(
    own_server: EmbeddedNeo4j, own_config: EmbeddedConfig
) -> None:
    password = own_config.password_file.read_text().strip()
    assert len(password) >= 24
    assert oct(own_config.password_file.stat().st_mode & 0o777) == "0o600"
    with GraphDatabase.driver(own_server.uri, auth=own_server.auth) as driver:
        records, _, _ = driver.execute_query(queries.SERVER_COMPONENTS)
    assert records[0]["versions"][0].startswith("5.26")
    assert records[0]["edition"] == "community"
    # Auth is on: a wrong password is refused.
    with (
        GraphDatabase.driver(own_server.uri, auth=("neo4j", "wrong-password")) as driver,
        pytest.raises(AuthError),
    ):
        driver.verify_connectivity()


def test_migrations_apply_once_and_indexes_come_online(own_server: EmbeddedNeo4j) -> None:
    target = Neo4jTarget(own_server.uri, *own_server.auth)
    with open_driver(target) as driver:
        runner = MigrationRunner(driver)
        assert runner.current_version() == 0
        applied = runner.migrate()
        assert [m.version for m in applied] == [m.version for m in discover()]
        assert runner.migrate() == []  # a re-run is a no-op
        assert {s.state for s in runner.status()} == {"applied"}
        records, _, _ = driver.execute_query(queries.SHOW_INDEXES)
        indexes = {r["name"]: r for r in records}
        for name, kind in [
            ("technique_embedding", "VECTOR"),
            ("example_code_embedding", "VECTOR"),
            ("technique_text", "FULLTEXT"),
        ]:
            assert indexes[name]["type"] == kind
            assert indexes[name]["state"] == "ONLINE"
        config = indexes["technique_embedding"]["options"]["indexConfig"]
        assert config["vector.dimensions"] == 384
        assert config["vector.similarity_function"].lower() == "cosine"
        assert set(indexes["technique_text"]["properties"]) == {"name", "aliases", "description"}
        constraints, _, _ = driver.execute_query(queries.SHOW_CONSTRAINTS)
        assert {"technique_name_unique", "example_id_unique"} <= {c["name"] for c in constraints}
        ready = readiness(driver, "neo4j")
        assert ready["schema_up_to_date"] is True
        assert ready["schema_version"] == discover()[-1].version


def test_edited_migration_is_refused(own_server: EmbeddedNeo4j, tmp_path: Path) -> None:
    edited_dir = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS_DIR, edited_dir, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    first = sorted(edited_dir.glob("V001__*.cypher"))[0]
    first.write_text(first.read_text() + "\nCREATE INDEX sneaky IF NOT EXISTS FOR (n:Sneaky) ON (n.x);\n")
    target = Neo4jTarget(own_server.uri, *own_server.auth)
    with open_driver(target) as driver:
        MigrationRunner(driver).migrate()  # the real files are applied first
        with pytest.raises(MigrationChecksumError, match="edited after it was applied"):
            MigrationRunner(driver, directory=edited_dir).migrate()
        records, _, _ = driver.execute_query("SHOW INDEXES YIELD name WHERE name = 'sneaky' RETURN name")
        assert records == []  # nothing of the edited file ran


def test_port_taken_is_a_clear_error(
    own_server: EmbeddedNeo4j, own_config: EmbeddedConfig, tmp_path: Path
) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        other = EmbeddedNeo4j(replace(own_config, home=tmp_path / "other", port=port))
        with pytest.raises(PortInUseError, match=str(port)):
            other.start()


def test_missing_java_and_maven_are_clear_errors(
    own_config: EmbeddedConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk-here"))
    with pytest.raises(JavaNotFoundError, match="Java 17"):
        EmbeddedNeo4j(replace(own_config, home=tmp_path / "a")).start()
    monkeypatch.delenv("JAVA_HOME")
    # A PATH that has java but no mvn (they share /usr/bin here, so link java alone into a folder).
    only_java = tmp_path / "only-java"
    only_java.mkdir()
    java = shutil.which("java")
    assert java is not None
    (only_java / "java").symlink_to(os.path.realpath(java))
    monkeypatch.setenv("PATH", str(only_java))
    assert shutil.which("mvn") is None
    with pytest.raises(MavenNotFoundError, match="Maven"):
        EmbeddedNeo4j(replace(own_config, home=tmp_path / "b", cache_dir=tmp_path / "empty-cache")).start()


def test_restart_keeps_data_and_stop_leaves_no_process(
    own_server: EmbeddedNeo4j, own_config: EmbeddedConfig
) -> None:
    """The module's server, stopped and started again on its data (the last test of the module to use
    it: a JVM start less than a server of its own)."""
    config, server = own_config, own_server
    pid = server.pid
    assert pid is not None
    with GraphDatabase.driver(server.uri, auth=server.auth) as driver:
        driver.execute_query("CREATE (:Canary {value: $v})", v=42)
    server.stop()
    assert not _process_alive(pid)
    assert wait_for_port_release(config.host, config.port)

    again = EmbeddedNeo4j(config)
    again.start()
    try:
        assert again.password == server.password
        with GraphDatabase.driver(again.uri, auth=again.auth) as driver:
            records, _, _ = driver.execute_query("MATCH (c:Canary) RETURN c.value AS v")
        assert [r["v"] for r in records] == [42]
    finally:
        again.stop()
    assert port_is_free(config.host, config.port) or wait_for_port_release(config.host, config.port)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it holds no resources once reaped.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
