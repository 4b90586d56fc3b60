"""Several examples at once in real Chromium (issue 31): a bulk approve or reject from the review queue,
one confirmation for all, one audit entry per example, refused without the session's CSRF token or the
curator role; and the backlog, the pending examples counted by transition, technique and task, the
longest waiting first."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from urllib.parse import quote

import pytest
from playwright.sync_api import Page, ViewportSize, expect

from graphdb.models import Example, ReviewStatus, Role
from tests.e2e import test_workspace as workspace
from tests.e2e.stack import ROOT, SignedIn, Stack

pytestmark = [pytest.mark.neo4j, pytest.mark.timeout(900)]

# The stack (API, Neo4j, executor, seed graph), browser and signed-in pages: tests/e2e/conftest.py.


def pending(stack: Stack) -> list[Example]:
    return stack.store.list_examples(source=None, target=None, status=ReviewStatus.PENDING, limit=1000)


def test_bulk_reject_asks_once_and_audits_each_example(stack: Stack, signed_in: SignedIn) -> None:
    with signed_in(Role.CURATOR) as page:
        boxes = page.locator("#queue-items input.pick")
        chosen = [boxes.nth(i).get_attribute("value") for i in range(3)]
        assert all(chosen) and len(set(chosen)) == 3
        for i in range(3):
            boxes.nth(i).check()
        page.select_option("#bulk-decision", "reject")
        page.fill("#bulk-reason", "times the warm-up")
        page.click("#bulk-review")
        expect(page.locator("#confirm-what")).to_contain_text("Reject 3 example(s) ('times the warm-up')")
        assert {stack.store.get_example(str(i)).review_status for i in chosen} == {ReviewStatus.PENDING}
        page.click("#confirm")
        expect(page.locator(".flash-ok")).to_have_text("Rejected 3 example(s).")
        for example_id in chosen:
            assert stack.store.get_example(str(example_id)).review_status == ReviewStatus.REJECTED
            assert workspace.audit_of(stack, f"example:{example_id}") == [("curator", "example.rejected")]
            expect(page.locator(f'#queue-items input[value="{example_id}"]')).to_have_count(0)


def test_bulk_approve_takes_every_example_a_filter_shows(stack: Stack, signed_in: SignedIn) -> None:
    by_transition = Counter(f"{e.source} -> {e.target}" for e in pending(stack))
    transition, count = next((t, n) for t, n in by_transition.most_common() if n >= 2)
    with signed_in(Role.CURATOR) as page:
        page.goto(f"{stack.url}/ui/queue?transition={quote(transition)}")
        expect(page.locator("#queue-items li")).to_have_count(count)
        page.check("#bulk-all")
        page.click("#bulk-review")
        expect(page.locator("#confirm-what")).to_contain_text(f"Approve {count} example(s)")
        page.click("#confirm")
        expect(page.locator(".flash-ok")).to_have_text(f"Approved {count} example(s).")
        # Back on the queue with its filter: nothing of that transition waits any more.
        expect(page.locator("#queue-empty")).to_be_visible()
    assert not any(f"{e.source} -> {e.target}" == transition for e in pending(stack))


def test_bulk_review_is_refused_without_csrf_or_the_curator_role(stack: Stack, signed_in: SignedIn) -> None:
    example_id = pending(stack)[0].id
    with signed_in(Role.CURATOR) as page:
        answer = page.request.post(
            f"{stack.url}/ui/queue/review",
            form={"ids": example_id, "decision": "approve", "confirmed": "yes"},
        )
        assert answer.status == 403 and "CSRF" in answer.text()
    with signed_in(Role.READER) as page:
        expect(page.locator("#queue-items li").first).to_be_visible()
        expect(page.locator("#bulk, #queue-items input.pick")).to_have_count(0)
        csrf = page.locator("body").get_attribute("data-csrf")
        answer = page.request.post(
            f"{stack.url}/ui/queue/review",
            form={"ids": example_id, "decision": "approve", "confirmed": "yes", "csrf": str(csrf)},
        )
        assert answer.status == 403 and "curator" in answer.text()
    assert stack.store.get_example(example_id).review_status == ReviewStatus.PENDING


def test_the_backlog_counts_what_waits_the_longest_waiting_first(stack: Stack, signed_in: SignedIn) -> None:
    waiting: dict[str, tuple[datetime, int]] = {}
    for e in pending(stack):
        name = f"{e.source} -> {e.target}"
        oldest, n = waiting.get(name, (e.created_at, 0))
        waiting[name] = (min(oldest, e.created_at), n + 1)
    expected = sorted(waiting, key=lambda name: (waiting[name][0], -waiting[name][1], name))
    with signed_in(Role.READER) as page:
        page.click("#backlog-link")
        expect(page.locator("#backlog-total")).to_contain_text(
            f"{sum(n for _, n in waiting.values())} example(s)"
        )
        rows = page.locator("#backlog-transition tbody tr")
        expect(rows).to_have_count(len(expected))
        assert [rows.nth(i).get_attribute("data-name") for i in range(len(expected))] == expected
        counts = [int(rows.nth(i).locator("td.count").inner_text()) for i in range(len(expected))]
        assert counts == [waiting[name][1] for name in expected]
        # A group's link is the review queue filtered to exactly that group.
        rows.first.get_by_role("link").click()
        expect(page.locator("#queue-items li")).to_have_count(waiting[expected[0]][1])


# -- at phone width and at 1280 px: the controls fit and stay reachable; screenshots for docs/ ----------

SHOTS = ROOT / "docs" / "screenshots"
SIZES = {"390x844": ViewportSize(width=390, height=844), "1280x800": ViewportSize(width=1280, height=800)}


def _inside_the_width(page: Page, selector: str, width: int) -> None:
    """Every element matched is visible, within the viewport's width, and the page has no sideways scroll."""
    boxes = page.evaluate(
        """(sel) => [...document.querySelectorAll(sel)].map((el) => {
                 const r = el.getBoundingClientRect(); return [el.id || el.name || el.tagName, r.left, r.right, r.width]; })""",
        selector,
    )
    assert boxes, selector
    for name, left, right, box_width in boxes:
        assert box_width > 0 and left >= 0 and right <= width + 0.5, (name, left, right, width)
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width + 1


@pytest.mark.parametrize("size", list(SIZES))
def test_bulk_controls_fit_and_are_reachable(stack: Stack, signed_in: SignedIn, size: str) -> None:
    viewport = SIZES[size]
    with signed_in(Role.CURATOR) as page:
        page.set_viewport_size(viewport)
        page.goto(f"{stack.url}/ui/queue")
        expect(page.locator("#bulk")).to_be_visible()
        _inside_the_width(
            page,
            "#bulk, #bulk label, #bulk select, #bulk button, #bulk-reason, #queue-items input.pick",
            viewport["width"],
        )
        page.locator("#queue-items input.pick").first.check()  # reachable: a real click lands on it
        page.locator("#bulk").scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / f"queue-bulk-{size}.png"))
        page.click("#bulk-review")  # and the confirmation that follows fits too
        expect(page.locator("#confirm-what")).to_contain_text("Approve 1 example(s)")
        _inside_the_width(page, "#confirm, #confirm-what", viewport["width"])


@pytest.mark.parametrize("size", list(SIZES))
def test_the_backlog_fits(stack: Stack, signed_in: SignedIn, size: str) -> None:
    viewport = SIZES[size]
    with signed_in(Role.READER) as page:
        page.set_viewport_size(viewport)
        page.goto(f"{stack.url}/ui/backlog")
        expect(page.locator("#backlog-total")).to_be_visible()
        _inside_the_width(page, "table.grid, table.grid a", viewport["width"])
        page.screenshot(path=str(SHOTS / f"backlog-{size}.png"))
