"""The API service's settings: one object, read from the environment (prefix REGRAPH_), passed into create_app."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_data_dir() -> Path:
    return Path.home() / ".local" / "share" / "regraph"


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

    executor_url: str | None = Field(
        None, description="the GPU executor service; unset = `regraph up` starts a local one"
    )
    max_request_bytes: int = Field(5_000_000, ge=1024, description="larger request bodies are refused (413)")
