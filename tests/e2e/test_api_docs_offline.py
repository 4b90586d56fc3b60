"""`/docs` renders with no network beyond the API itself (issue 15: Swagger UI came from a CDN).

Real Chromium opens the page with every request to another host refused; the Swagger UI must still
render the API's title and operations, and the page must not even try to reach another host.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from playwright.sync_api import Browser, Route, expect

from graphdb.connection import Neo4jTarget
from tests.e2e.stack import fresh_context
from tests.integration.api.graph_support import serve


@pytest.fixture(scope="module")
def api_url(neo4j_target: Neo4jTarget, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve(neo4j_target, Path(tmp_path_factory.mktemp("docs")), preload_retrieval=False)


def test_docs_render_offline(api_url: str, browser: Browser) -> None:
    own_host = urlparse(api_url).netloc
    elsewhere: list[str] = []

    def only_the_api(route: Route) -> None:
        if urlparse(route.request.url).netloc == own_host:
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    with fresh_context(browser) as context:
        context.route("**/*", only_the_api)
        page = context.new_page()
        page.goto(f"{api_url}/docs")
        expect(page.locator(".swagger-ui .info .title")).to_contain_text("ReGraph", timeout=60_000)
        expect(page.locator(".opblock-summary-path", has_text="/v1/cypher").first).to_be_visible()
    assert elsewhere == []
