"""The README's MCP client configurations parse, and each is in its client's own format.

A configuration copied from the README is the first thing a coding agent's user runs: each block must
be valid JSON, name the stdio command that exists in this checkout, and use the keys and variable
syntax its client reads (Claude Code: ``mcpServers`` and ``${VAR}``; Cursor: ``mcpServers`` and
``${env:VAR}``; VS Code: ``servers``, ``type`` on every server and ``${input:id}`` of a declared input).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()


def _block_after(marker: str) -> dict[str, Any]:
    start = README.index(marker)
    match = re.compile(r"```json\n(.*?)\n```", re.S).search(README, start)
    assert match is not None, f"no JSON block after {marker!r}"
    loaded: dict[str, Any] = json.loads(match.group(1))
    return loaded


CLIENTS = {
    "claude-code": "Claude Code, `.mcp.json`",
    "cursor": "Cursor, `.cursor/mcp.json`",
    "vscode": "VS Code (GitHub Copilot's agent mode), `.vscode/mcp.json`",
}


def _servers(client: str, config: dict[str, Any]) -> dict[str, Any]:
    servers: dict[str, Any] = config["servers" if client == "vscode" else "mcpServers"]
    return servers


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_each_client_gets_an_http_and_a_stdio_server(client: str) -> None:
    servers = _servers(client, _block_after(CLIENTS[client]))
    assert set(servers) == {"regraph", "regraph-local"}
    http, local = servers["regraph"], servers["regraph-local"]
    assert http["url"] == "http://127.0.0.1:8080/mcp" and "X-API-Key" in http["headers"]
    assert local["command"] == "bash" and local["args"][0] == "-c"
    command = local["args"][1]
    assert "source scripts/env.sh" in command and command.endswith("exec python -m regraph_cli mcp")
    assert (ROOT / "scripts" / "env.sh").is_file() and (ROOT / "regraph_cli" / "mcp.py").is_file()
    # The server reads its key from REGRAPH_API_KEY; a client's own settings never go in the server's env.
    assert set(local["env"]) == {"REGRAPH_API_KEY"}


def test_each_client_uses_its_own_variable_syntax() -> None:
    claude = _servers("claude-code", _block_after(CLIENTS["claude-code"]))
    assert claude["regraph"]["headers"]["X-API-Key"] == "${REGRAPH_TOKEN}"
    assert claude["regraph"]["type"] == "http" and claude["regraph-local"]["type"] == "stdio"
    cursor = _servers("cursor", _block_after(CLIENTS["cursor"]))
    assert cursor["regraph"]["headers"]["X-API-Key"] == "${env:REGRAPH_TOKEN}"
    assert cursor["regraph-local"]["env"]["REGRAPH_API_KEY"] == "${env:REGRAPH_TOKEN}"
    vscode = _block_after(CLIENTS["vscode"])
    inputs = {i["id"] for i in vscode["inputs"]}
    for server in vscode["servers"].values():
        assert server["type"] in {"http", "stdio"}
        used = re.findall(r"\$\{input:([^}]+)\}", json.dumps(server))
        assert used and set(used) <= inputs
