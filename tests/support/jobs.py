"""Submitting an optimization job to the API and following its server-sent events, for the HTTP tests."""

from __future__ import annotations

from typing import Any

import httpx

from regraph_cli.optimize import parse_sse


def submit_job(url: str, body: dict[str, Any]) -> str:
    """POST /v1/optimize; the accepted job's id (202, with its URL in Location)."""
    response = httpx.post(f"{url}/v1/optimize", json=body, timeout=60)
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert response.headers["location"] == accepted["job_url"]
    job_id: str = accepted["id"]
    return job_id


def follow_job(
    url: str, job_id: str, after: int = -1, timeout: float = 300
) -> list[tuple[str, dict[str, Any]]]:
    """Every (event, data) of the job's event stream after `after`, until the stream ends."""
    with httpx.stream(
        "GET", f"{url}/v1/jobs/{job_id}/events", params={"after": after}, timeout=timeout
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(parse_sse(response.iter_lines()))
