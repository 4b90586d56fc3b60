"""The graph page, the workspace at phone width and the small fixes of issue 31, in a real Chromium
against the real stack (the API over the embedded Neo4j with the seed graph).

The graph: a layered layout without the techniques that have no transitions (listed apart, collapsed),
a click that opens the side panel instead of leaving the page, a search that centres the technique.
At 390×844 the navigation is one row and the review diff is stacked with full-width code panes.
Screenshots of the graph at 1280×800 and 390×844 go to docs/screenshots/.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from neo4j import Driver
from playwright.sync_api import Browser, Page, ViewportSize, expect

from graphdb.connection import Neo4jTarget
from graphdb.models import Role
from search.protocols import INITIAL_TECHNIQUE
from tests.e2e.stack import ROOT, Stack, fresh_context, sign_in

pytestmark = [pytest.mark.neo4j, pytest.mark.timeout(900)]
expect.set_options(timeout=30_000)
SHOTS = ROOT / "docs" / "screenshots"
WIDE = ViewportSize(width=1280, height=800)
PHONE = ViewportSize(width=390, height=844)


@pytest.fixture()
def page(stack: Stack, browser: Browser) -> Iterator[Page]:
    """An admin signed in, collecting the page's JavaScript errors in `page.errors`."""
    with fresh_context(browser) as context:
        opened = context.new_page()
        opened.set_default_timeout(60_000)
        errors: list[str] = []
        opened.on("pageerror", lambda e: errors.append(str(e)))
        opened.on(
            "console",
            lambda m: (
                errors.append(m.text)
                if m.type == "error" and "Failed to load resource" not in m.text
                else None
            ),
        )
        opened.on(  # a missing resource, named (the browser's own favicon request aside)
            "response",
            lambda r: (
                errors.append(f"{r.status} {r.url}") if r.status >= 400 and "favicon" not in r.url else None
            ),
        )
        opened.errors = errors  # type: ignore[attr-defined]
        sign_in(opened, stack.url, stack.tokens[Role.ADMIN])
        yield opened


def expect_graph_ready(page: Page) -> None:
    """The graph page's drawing is done; else say why as the page saw it: its status line (still
    "loading…", or the error that stopped the drawing: a failed script, a data request's error) and the
    errors that the `page` fixture collected, where it did (session 32 saw the drawing not done in 30 s
    at load ~3, five times, without a why)."""
    try:
        expect(page.locator("#graph[data-ready=true]")).to_have_count(1)
    except AssertionError as e:
        status = page.locator("#graph-status").text_content()
        errors = getattr(page, "errors", "not collected")
        raise AssertionError(f"the graph was not drawn: status {status!r}, page errors {errors}") from e


def open_graph(page: Page, url: str) -> dict[str, object]:
    page.goto(f"{url}/ui/graph")
    expect_graph_ready(page)
    data: dict[str, object] = page.evaluate("() => fetch('/ui/graph/data').then((r) => r.json())")
    return data


# -- the graph --------------------------------------------------------------------------------------------


def test_graph_is_layered_without_unlinked_techniques_and_clicks_stay_on_the_page(
    stack: Stack, page: Page
) -> None:
    page.set_viewport_size(WIDE)
    data = open_graph(page, stack.url)
    drawn = set(page.evaluate("() => graphView.nodes(':visible').map((n) => n.id())"))
    unlinked = data["unlinked"]
    assert isinstance(unlinked, list) and unlinked, "the seed graph has techniques without transitions"
    assert not drawn & set(unlinked), "techniques without transitions are drawn in the main layout"
    assert INITIAL_TECHNIQUE in drawn
    expect(page.locator("#graph-unlinked")).not_to_have_attribute("open", "")
    expect(page.locator("#graph-unlinked-count")).to_have_text(str(len(unlinked)))
    # Layered, left to right: the initial technique sits before each technique it leads to.
    above = page.evaluate(
        """(root) => graphView.getElementById(root).outgoers('node')
               .every((n) => n.position('x') > graphView.getElementById(root).position('x'))""",
        INITIAL_TECHNIQUE,
    )
    assert above
    page.screenshot(path=str(SHOTS / "graph-1280x800.png"))

    # A click on a node: the side panel, its neighbourhood highlighted, the same page.
    before = page.url
    point = page.evaluate(
        """(root) => { const p = graphView.getElementById(root).renderedPosition();
                       const b = document.getElementById('graph').getBoundingClientRect();
                       return {x: b.left + p.x, y: b.top + p.y}; }""",
        INITIAL_TECHNIQUE,
    )
    page.mouse.click(point["x"], point["y"])
    expect(page.locator("#graph-panel h2")).to_have_text(INITIAL_TECHNIQUE)
    expect(page.locator("#graph-panel dl.stats")).to_contain_text("transitions out")
    assert page.url == before
    assert page.evaluate("() => graphView.elements('.faded').length") > 0

    # An edge from the panel: its statistics and its top examples as links to the examples.
    page.locator("#graph-panel ol.succ a").first.click()
    expect(page.locator("#graph-panel dl.stats")).to_contain_text("median speedup")
    expect(page.locator("#graph-panel ol.top-examples a[href^='/ui/examples/']").first).to_be_visible()
    assert page.url == before
    assert page.errors == []  # type: ignore[attr-defined]


def test_graph_search_centres_the_technique(stack: Stack, page: Page) -> None:
    page.set_viewport_size(WIDE)
    open_graph(page, stack.url)
    # The drawn technique farthest from the centre of the first view.
    name = page.evaluate(
        """() => { const w = graphView.width() / 2, h = graphView.height() / 2;
                   const far = graphView.nodes().max((n) => Math.hypot(n.renderedPosition('x') - w,
                                                                       n.renderedPosition('y') - h));
                   return far.ele.id(); }"""
    )
    page.fill("#graph-find", name)
    page.press("#graph-find", "Enter")
    page.wait_for_function(
        """(name) => { const p = graphView.getElementById(name).renderedPosition();
                       return Math.abs(p.x - graphView.width() / 2) < 3 && Math.abs(p.y - graphView.height() / 2) < 3; }""",
        arg=name,
    )
    expect(page.locator("#graph-panel h2")).to_have_text(name)
    assert page.errors == []  # type: ignore[attr-defined]


def test_graph_at_phone_width(stack: Stack, page: Page) -> None:
    page.set_viewport_size(PHONE)
    open_graph(page, stack.url)
    assert page.evaluate("() => graphView.width()") >= 300
    page.screenshot(path=str(SHOTS / "graph-390x844.png"))
    assert page.errors == []  # type: ignore[attr-defined]


# -- 390 px -----------------------------------------------------------------------------------------------


def test_nav_and_review_diff_at_390px(stack: Stack, page: Page) -> None:
    page.set_viewport_size(PHONE)
    page.goto(f"{stack.url}/ui/queue")
    expect(page.locator("#diff")).to_be_visible()
    nav = page.locator("header.top").bounding_box()
    assert nav is not None and nav["height"] < 120, nav
    widths = page.evaluate(
        """() => [...document.querySelectorAll('#diff td.code')]
                 .filter((td) => td.offsetParent !== null).map((td) => td.getBoundingClientRect().width)"""
    )
    assert widths and min(widths) >= 300, widths
    assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"] + 1
    page.locator("#diff").scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "review-390x844.png"))


def test_reasoning_beside_the_code_at_1280px(stack: Stack, page: Page) -> None:
    page.set_viewport_size(WIDE)
    page.goto(f"{stack.url}/ui/queue")
    diff, think = page.locator("#diff").bounding_box(), page.locator("#think").bounding_box()
    assert diff is not None and think is not None
    assert think["x"] >= diff["x"] + diff["width"], (diff, think)  # to its right
    assert think["y"] < 800, think  # in the first view
    style = page.evaluate("() => getComputedStyle(document.querySelector('#diff td.code')).wordBreak")
    assert style == "normal"  # wraps between tokens, never inside one


# -- the small items --------------------------------------------------------------------------------------


def test_admin_key_name_pattern_is_a_valid_regular_expression(stack: Stack, page: Page) -> None:
    page.goto(f"{stack.url}/ui/admin")
    validity = page.evaluate(
        """() => { const i = document.getElementById('key-name');
                   return ['ok-name.1@x', 'bad name!'].map((v) => { i.value = v; return i.validity.valid; }); }"""
    )
    assert validity == [True, False]


def test_import_without_a_file_names_the_problem(stack: Stack, page: Page) -> None:
    page.goto(f"{stack.url}/ui/admin")
    page.evaluate(
        "() => { const f = document.getElementById('import-file').form; f.noValidate = true; f.requestSubmit(); }"
    )
    expect(page.locator(".flash-error")).to_contain_text("no file was chosen")


def test_cypher_console_leaves_out_embeddings(
    stack: Stack, page: Page, neo4j_driver: Driver, neo4j_target: Neo4jTarget
) -> None:
    with neo4j_driver.session(database=neo4j_target.database) as session:
        session.run(
            "MATCH (t:Technique {name: $name}) SET t.embedding = $v",
            name=INITIAL_TECHNIQUE,
            v=[0.123456] * 384,
        ).consume()
    page.goto(f"{stack.url}/ui/cypher")
    page.fill("#cypher-query", "MATCH (t:Technique {name: $name}) RETURN t")
    page.fill("#cypher-parameters", json.dumps({"name": INITIAL_TECHNIQUE}))
    page.click("#cypher-run")
    cell = page.locator("#cypher-result tbody td").first
    expect(cell).to_contain_text(INITIAL_TECHNIQUE)
    assert "0.123456" not in cell.inner_text()
    expect(cell).to_contain_text('"_left_out": ["embedding"]')


def test_audit_details_are_text_not_double_escaped(stack: Stack, page: Page) -> None:
    name = sorted(stack.store.technique_names())[-1]
    stack.store.describe_technique(name, "speedup > 2× & <b>no markup</b>", actor="e2e", embedding=None)
    page.goto(f"{stack.url}/ui/audit?target={quote('technique:' + name)}")
    cell = page.locator("#audit tbody td.mono").first
    expect(cell).to_contain_text("speedup > 2× & <b>no markup</b>")
    assert "\\u003e" not in cell.inner_text()
