"""The /ui Cypher console in Chromium takes the same per-key slots as /v1/cypher and the MCP tool (issue
27): one reader running more queries at once than its key may (here 2) gets the limit error in the
console for the extra one, and the queries Neo4j cannot answer (a nested value it cannot send) end at
their limit plus the backstop with "unavailable", not two minutes later."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, expect

from api.state import GRAPH_BACKSTOP_S
from graphdb.models import Role
from tests.e2e.stack import Stack, fresh_context, sign_in

pytestmark = [pytest.mark.neo4j, pytest.mark.timeout(900)]

PER_KEY = 2
TIMEOUT_S = 2.0
NESTED = "RETURN reduce(a = [], i IN range(1, 20000) | [a]) AS a"  # Neo4j cannot send it back


# The module's stack runs with these API settings (tests/e2e/conftest.py).
STACK_SETTINGS = {"cypher_timeout_s": TIMEOUT_S, "cypher_max_concurrent_per_key": PER_KEY}


def test_one_reader_running_more_queries_than_its_slots_is_refused_in_the_console(
    stack: Stack, browser: Browser
) -> None:
    with fresh_context(browser) as context:
        first = context.new_page()
        first.set_default_timeout(60_000)
        sign_in(first, stack.url, stack.tokens[Role.READER])
        pages = [first, context.new_page(), context.new_page()]  # tabs of one signed-in session
        for page in pages:
            page.set_default_timeout(60_000)
            page.goto(f"{stack.url}/ui/cypher")
            page.fill("#cypher-query", NESTED)
        for page in pages:
            page.click("#cypher-run", no_wait_after=True)
        for page in pages:
            expect(page.locator("#cypher-error")).to_be_visible(timeout=60_000)
        errors = [page.locator("#cypher-error").inner_text() for page in pages]
    refused = [e for e in errors if f"this key already runs {PER_KEY} Cypher queries" in e]
    assert len(refused) == 1 and "rate_limited (429)" in refused[0], errors
    given_up = f"no answer within {TIMEOUT_S + GRAPH_BACKSTOP_S:g} s"
    stopped = [e for e in errors if given_up in e]
    assert len(stopped) == PER_KEY and all(re.search(r"\(503\)", e) for e in stopped), errors
