"""The API service's settings: one object, read from the environment (prefix REGRAPH_), passed into create_app."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

import regraph_data
from search.backends.config import ModelRoles


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or "localhost") is a loopback address."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def default_data_dir() -> Path:
    return Path.home() / ".local" / "share" / "regraph"


def default_tasks_dir() -> Path:
    """The task library installed with the service's data package (`regraph_data.TASKS_DIR`)."""
    return regraph_data.TASKS_DIR


def default_seed_graph() -> Path:
    """The seed graph export installed with the service's data package (`regraph_data.SEED_GRAPH_PATH`)."""
    return regraph_data.SEED_GRAPH_PATH


def default_cypher_examples() -> Path:
    """The documented example queries offered on /ui/cypher (docs/cypher-examples.md of the checkout)."""
    return Path(__file__).resolve().parent.parent / "docs" / "cypher-examples.md"


def default_ui_vendor_dir() -> Path:
    """The pinned npm packages the /ui pages load (node_modules/ of the checkout, `npm ci`)."""
    return Path(__file__).resolve().parent.parent / "node_modules"


class ApiSettings(BaseSettings):
    """Settings of the knowledge service. With nothing set, everything runs embedded on this machine."""

    model_config = SettingsConfigDict(env_prefix="REGRAPH_", extra="ignore")

    host: str = Field("127.0.0.1", description="address the API listens on")
    port: int = Field(8080, ge=0, le=65535, description="port the API listens on")
    data_dir: Path = Field(default_factory=default_data_dir, description="embedded Neo4j data, jobs, keys")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = "json"

    neo4j_uri: str | None = Field(
        None,
        validation_alias=AliasChoices("REGRAPH_NEO4J_URI", "NEO4J_URI"),
        description="an existing Neo4j server (bolt:// or neo4j://); unset = start the embedded one",
    )
    neo4j_user: str = Field("neo4j", validation_alias=AliasChoices("REGRAPH_NEO4J_USER", "NEO4J_USER"))
    neo4j_password: SecretStr | None = Field(
        None, validation_alias=AliasChoices("REGRAPH_NEO4J_PASSWORD", "NEO4J_PASSWORD")
    )
    neo4j_database: str = Field(
        "neo4j", validation_alias=AliasChoices("REGRAPH_NEO4J_DATABASE", "NEO4J_DATABASE")
    )
    neo4j_port: int = Field(7687, ge=0, le=65535, description="Bolt port of the embedded server")
    neo4j_heap_mb: int = Field(1024, ge=256, description="JVM heap of the embedded server")
    neo4j_pagecache_mb: int = Field(256, ge=16, description="page cache of the embedded server")
    migrate_on_start: bool = Field(True, description="apply pending schema migrations before serving")
    seed_graph: Path | None = Field(
        default_factory=default_seed_graph,
        description="graph export imported at start-up when the graph has no techniques; empty or 'none': off",
    )

    preload_retrieval: bool = Field(
        True,
        description="read every technique's retrieval candidates into the process's cache in the "
        "background at start-up, so that no search pays for a first read (graphdb.retrieval_cache)",
    )

    executor_url: str | None = Field(
        None, description="the GPU executor service; unset = `regraph up` starts a local one"
    )
    max_request_bytes: int = Field(5_000_000, ge=1024, description="larger request bodies are refused (413)")

    # Optimization jobs (/v1/optimize).
    models: ModelRoles = Field(
        default_factory=ModelRoles,
        description="model backends per role, from REGRAPH_MODELS__<ROLE>__<FIELD> (see search.backends.config)",
    )
    max_concurrent_jobs: int = Field(
        2, ge=1, le=64, description="optimization jobs running at once; others queue"
    )
    max_jobs_per_key: int = Field(
        4,
        ge=1,
        le=1000,
        description="optimization jobs one key may have queued or running at once; more get 429 with Retry-After",
    )
    jobs_retry_after_s: int = Field(
        30, ge=1, le=3600, description="the Retry-After (seconds) of a 429 for too many jobs of one key"
    )
    tasks_dir: Path | None = Field(
        default_factory=default_tasks_dir,
        description="where `task_ref` ids are looked up (one directory per task)",
    )
    offer_improvements_to_graph: bool = Field(
        False, description="add a job's verified improvement to the graph as pending examples"
    )
    job_events_kept: int = Field(2000, ge=10, description="newest progress events kept per job")
    executor_timeout_s: float = Field(
        960.0, gt=0, description="limit of one evaluation request to the executor"
    )

    # The graph API (/v1/retrieve, /v1/techniques, /v1/examples, /v1/cypher, ...).
    anonymous_read: bool = Field(
        False,
        description="let requests without an API key read the graph (as role reader); writes always need a key",
    )
    graph_read_timeout_s: float = Field(
        10.0,
        gt=0,
        le=600,
        description="longest a route's graph read may run (server-side limit); a Neo4j that does not "
        "answer at all is given up 5 s later (503)",
    )
    graph_write_timeout_s: float = Field(
        30.0,
        gt=0,
        le=600,
        description="longest a route's graph write may run (server-side limit: one stopped is rolled back); "
        "a Neo4j that does not answer at all is given up 5 s later (503, whether it was applied is unknown)",
    )
    graph_acquisition_timeout_s: float = Field(
        20.0,
        gt=0,
        le=600,
        description="longest the graph driver waits for a connection to Neo4j (a pooled one, or a new one "
        "whose server accepts the socket but does not answer the Bolt handshake) before the call fails "
        "as unavailable (503)",
    )
    cypher_timeout_s: float = Field(10.0, gt=0, le=600, description="longest a /v1/cypher query may run")
    cypher_row_limit: int = Field(1000, ge=1, le=100_000, description="most rows a /v1/cypher query returns")
    cypher_max_concurrent: int = Field(
        8, ge=1, le=256, description="/v1/cypher queries running at once (others wait their turn)"
    )
    cypher_max_concurrent_per_key: int = Field(
        4, ge=1, le=256, description="/v1/cypher queries one key may run at once (429 past it)"
    )
    cypher_max_response_bytes: int = Field(
        5_000_000, ge=1024, le=100_000_000, description="most bytes of rows a /v1/cypher answer carries"
    )

    # The curation workspace (/ui).
    ui_session_ttl_s: float = Field(
        8 * 3600.0, gt=0, description="a /ui session ends after this many seconds without a request"
    )
    cypher_examples_path: Path = Field(
        default_factory=default_cypher_examples,
        description="the Markdown file of example queries offered on /ui/cypher (missing: none offered)",
    )
    ui_vendor_dir: Path = Field(
        default_factory=default_ui_vendor_dir,
        description="the directory of the pinned npm packages the /ui pages load (htmx.org, cytoscape)",
    )
    ui_plain_http: bool = Field(
        False,
        description="the API is served over plain HTTP on a loopback address (development): the /ui "
        "cookies are not marked Secure; ignored on any other address, where they always are",
    )

    # One limiter for every face (api/limits.py): /v1, /ui and /mcp share these slots.
    evaluation_max_concurrent: int = Field(
        4,
        ge=1,
        le=256,
        description="candidate evaluations (MCP evaluate_candidate, start_evaluation) at once",
    )
    evaluation_max_concurrent_per_key: int = Field(
        2, ge=1, le=256, description="candidate evaluations one key may run at once (refused past it)"
    )
    slot_wait_s: float = Field(
        5.0,
        ge=0,
        le=120,
        description="longest a Cypher query or an evaluation waits for a free slot in all (then 503)",
    )

    # The HTTP edge under uvicorn (`regraph up`; api/edge.py).
    header_timeout_s: float = Field(
        10.0, gt=0, le=300, description="a connection sends a complete request head within this (else closed)"
    )
    body_idle_timeout_s: float = Field(
        30.0, gt=0, le=3600, description="a request body that sends nothing for this long is cut off"
    )
    keep_alive_timeout_s: int = Field(
        5, ge=1, le=300, description="an idle kept-alive connection is closed after this"
    )
    max_header_bytes: int = Field(
        32_768, ge=4096, le=1_048_576, description="longest request head (line and headers); 431 past it"
    )
    max_connections: int = Field(
        1024,
        ge=8,
        le=100_000,
        description="open connections in all; past it, idle ones are closed or new ones refused",
    )
    max_connections_per_client: int = Field(
        128, ge=1, le=100_000, description="open connections of one client address (IPv6: its /64)"
    )
    max_import_bytes: int = Field(
        256_000_000,
        ge=1024,
        description="largest graph export an admin may upload to re-import (POST /v1/graph/import/upload, /ui)",
    )

    @property
    def ui_secure_cookie(self) -> bool:
        """Whether the /ui cookies are marked Secure: always, unless plain HTTP on loopback is declared."""
        return not (self.ui_plain_http and is_loopback(self.host))

    @field_validator("seed_graph", mode="before")
    @classmethod
    def _seed_graph_off(cls, value: object) -> object:
        # REGRAPH_SEED_GRAPH="" (or "none") turns the seed off; a plain Path("") would mean ".".
        if isinstance(value, str) and value.strip().lower() in ("", "none"):
            return None
        return value
