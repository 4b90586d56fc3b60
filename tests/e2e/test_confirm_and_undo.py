"""Destructive curation in real Chromium: merges and rejects ask first, and a merge is undone from the audit page."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from graphdb.models import IngestBatch, RelabelDecision, RelabelOutcome, ReviewStatus, Role, utc_now
from tests.e2e import test_workspace as workspace
from tests.e2e.stack import SignedIn, Stack, record_queued_name

pytestmark = [pytest.mark.neo4j, pytest.mark.timeout(900)]

# The stack, browser and signed-in pages: tests/e2e/conftest.py.


def knowledge(stack: Stack) -> dict[str, Any]:
    """The graph's export without what may differ after a merge and its undo: the time and the audit log."""
    return stack.store.export_graph().model_dump(mode="json", exclude={"exported_at", "audit"})


def busiest_pair(stack: Stack) -> tuple[str, str]:
    """Two techniques with transitions, the one with more examples merged into the other."""
    names = workspace.techniques(stack)
    counted = sorted(
        (
            (sum(t.stats.n_examples + t.stats.n_rejected for t in stack.store.transitions_of(n)), n)
            for n in names
        ),
        reverse=True,
    )
    return counted[0][1], counted[1][1]


def test_merge_asks_first_and_the_audit_page_undoes_it_exactly(stack: Stack, signed_in: SignedIn) -> None:
    source, into = busiest_pair(stack)
    moving = stack.store.transitions_of(source)
    examples = sum(t.stats.n_examples + t.stats.n_rejected for t in moving)
    before = knowledge(stack)
    with signed_in(Role.CURATOR) as page:
        page.goto(f"{stack.url}/ui/technique?name={quote(source)}")
        page.click("#merge-technique summary")
        page.fill("#merge-into", into)
        page.click("#merge")
        # The confirm step names what moves; cancelling changes nothing.
        expect(page.locator("#confirm-what")).to_contain_text(
            f"{len(moving)} transition(s) and {examples} example(s) move to {into!r}"
        )
        page.click("#cancel")
        expect(page.locator("#technique-name")).to_have_text(source)
        assert knowledge(stack) == before

        page.click("#merge-technique summary")
        page.fill("#merge-into", into)
        page.click("#merge")
        page.click("#confirm")
        expect(page.locator("#technique-name")).to_have_text(into)
        assert knowledge(stack) != before

        page.get_by_role("link", name="Audit").click()
        entry = stack.store.list_audit(target=f"technique:{into}", limit=1)[0]
        assert entry.action == "technique.merge"
        row = page.locator(f'form.undo-merge[data-id="{entry.id}"]')
        expect(page.locator("#audit")).not_to_contain_text(
            '"embedding"'
        )  # the undo record stays off the page
        row.get_by_role("button", name="Undo merge").click()
        expect(page.locator(".flash-ok")).to_contain_text(f"Merge undone: {source!r}")
        assert knowledge(stack) == before
        # Undone once: the button is gone, and a replayed undo is refused with a clear message.
        expect(page.locator(f'form.undo-merge[data-id="{entry.id}"]')).to_have_count(0)
        page.goto(f"{stack.url}/ui/technique?name={quote(source)}")
        expect(page.locator("#technique-name")).to_have_text(source)
    with signed_in(Role.READER) as page:
        page.goto(f"{stack.url}/ui/audit")
        expect(page.locator("form.undo-merge")).to_have_count(0)


def test_reject_asks_first(stack: Stack, signed_in: SignedIn) -> None:
    with signed_in(Role.CURATOR) as page:
        page.goto(f"{stack.url}/ui/queue")
        shown = page.locator("#example").get_attribute("data-example-id")
        assert shown is not None
        page.keyboard.press("r")
        page.keyboard.type("reads past the end of the row")
        page.keyboard.press("Enter")
        expect(page.locator("#confirm-what")).to_contain_text(f"Reject example {shown[:12]}")
        assert stack.store.get_example(shown).review_status == ReviewStatus.PENDING
        page.click("#confirm")
        expect(page.locator(".flash-ok")).to_contain_text(f"Rejected example {shown[:12]}")
        assert stack.store.get_example(shown).review_status == ReviewStatus.REJECTED


def test_queue_merge_asks_first_and_the_decisions_page_shows_where_the_name_went(
    stack: Stack, signed_in: SignedIn
) -> None:
    near = workspace.techniques(stack)[6]
    decision_id, name, _ = record_queued_name(stack.store, "Stage the halo through smem", near)
    # A name the relabeler merged but flagged: it is on `near` already, so it is not "new".
    flagged = RelabelDecision(
        id="e2e-flagged-merge",
        candidate="Halo staging in smem",
        candidate_description="",
        outcome=RelabelOutcome.MERGED,
        technique=near,
        matched=near,
        score=0.9,
        decided_by="model",
        flags=["the code does not show it"],
        at=utc_now(),
    )
    stack.store.ingest(IngestBatch(decisions=[flagged]))
    with signed_in(Role.CURATOR) as page:
        page.goto(f"{stack.url}/ui/relabel-queue")
        item = page.locator(f'section.queued[data-id="{decision_id}"]')
        # The name is its own technique here: accepting it keeps it as new.
        expect(item.get_by_role("button", name="Accept as new")).to_have_count(1)
        merged = page.locator(f'section.queued[data-id="{flagged.id}"]')
        expect(merged.get_by_role("button", name="Accept as new")).to_have_count(0)
        expect(merged.get_by_role("button", name=f"Keep on {near}")).to_have_count(1)
        item.locator("input.merge-into").fill(near)
        item.get_by_role("button", name="Merge").click()
        expect(page.locator("#confirm-what")).to_contain_text(f"into {near!r}")
        assert stack.store.get_decision(decision_id).resolution is None
        page.click("#confirm")
        expect(page.locator(".flash-ok")).to_contain_text(f"Merged {name!r} into {near!r}")
        page.goto(f"{stack.url}/ui/relabel")
        expect(page.locator(f'#decisions tr[data-id="{decision_id}"] td').nth(2)).to_have_text(near)
