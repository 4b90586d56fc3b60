"""Shared fixtures of the browser tests: one Chromium for the whole package, one stack per module.

Each module gets its own stack (`running_stack`: the graph emptied, the seed graph loaded by the API's
start-up, one key per role), so a module's tests see the graph its own tests left, never another
module's. A module that needs other API settings names them in `STACK_SETTINGS` (a dict of
`ApiSettings` overrides). Every test opens its own browser context, so the shared Chromium carries no
cookies from one test to the next.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from neo4j import Driver
from playwright.sync_api import Browser, Page, sync_playwright

from graphdb.connection import Neo4jTarget
from graphdb.models import Role
from tests.e2e.stack import SignedIn, Stack, chromium, fresh_context, running_stack, sign_in


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, started once for the browser tests and closed after the last of them."""
    with sync_playwright() as playwright, chromium(playwright) as launched:
        yield launched


@pytest.fixture(scope="module")
def stack(
    request: pytest.FixtureRequest,
    neo4j_driver: Driver,
    neo4j_target: Neo4jTarget,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    """The module's stack (API, executor, seed graph) with the module's `STACK_SETTINGS`, if any."""
    overrides = dict(getattr(request.module, "STACK_SETTINGS", {}))
    workdir = Path(tmp_path_factory.mktemp("e2e"))
    with running_stack(neo4j_driver, neo4j_target, workdir, **overrides) as running:
        yield running


@pytest.fixture()
def signed_in(stack: Stack, browser: Browser) -> SignedIn:
    """A fresh browser context signed in with the key of a role, on the review queue."""

    @contextmanager
    def open_as(role: Role) -> Iterator[Page]:
        with fresh_context(browser) as context:
            page = context.new_page()
            page.set_default_timeout(60_000)
            sign_in(page, stack.url, stack.tokens[role])
            yield page

    return open_as
