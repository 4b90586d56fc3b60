"""The curation workspace in a real Chromium against the real stack: the API over the embedded Neo4j
with the seed graph, the real executor (compile-only here) and, standing in for the LLM, the replay
backend built from a teacher trajectory. One server for the module; each test signs in afresh and
works on its own examples and techniques, so their order does not matter.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from graphdb.models import (
    AliasAddition,
    IngestBatch,
    RelabelDecision,
    RelabelOutcome,
    ReviewStatus,
    Role,
    Technique,
    utc_now,
)
from search.protocols import INITIAL_TECHNIQUE
from tests.e2e.stack import (
    JOB_TASK,
    SignedIn,
    Stack,
    fresh_context,
    record_queued_name,
    sign_in,
)
from tests.e2e.test_graph_and_narrow import expect_graph_ready

# The first test pays for the start of the stack (Neo4j, executor, API, Chromium): minutes on a busy machine.
pytestmark = [pytest.mark.neo4j, pytest.mark.timeout(900)]

# Generous waits: CI's 2 cores run the browser, the API, Neo4j and the executor at once.
expect.set_options(timeout=30_000)


def pending_ids(stack: Stack) -> list[str]:
    return [
        e.id
        for e in stack.store.list_examples(source=None, target=None, status=ReviewStatus.PENDING, limit=1000)
    ]


def techniques(stack: Stack) -> list[str]:
    """The graph's techniques but the initial one, by name: each test takes its own from this list."""
    return sorted(t.name for t in stack.store.list_techniques(limit=1000) if t.name != INITIAL_TECHNIQUE)


def audit_of(stack: Stack, target: str) -> list[tuple[str, str]]:
    return [(a.actor, a.action) for a in stack.store.list_audit(target=target, limit=50)]


# -- signing in -------------------------------------------------------------------------------------------


def test_each_role_sees_what_it_may_do(signed_in: SignedIn) -> None:
    with signed_in(Role.READER) as page:
        expect(page.locator(".role")).to_have_text("reader · reader")
        expect(page.locator("#diff")).to_be_visible()
        expect(page.locator("#read-only-note")).to_be_visible()
        expect(page.locator("#approve")).to_have_count(0)
        expect(page.get_by_role("link", name="Admin")).to_have_count(0)
    with signed_in(Role.CURATOR) as page:
        expect(page.locator("#approve")).to_be_visible()
        expect(page.get_by_role("link", name="Admin")).to_have_count(0)
    with signed_in(Role.ADMIN) as page:
        page.get_by_role("link", name="Admin").click()
        expect(page.locator("#keys")).to_contain_text("curator")


def test_wrong_key_then_revoked_key_send_the_browser_to_sign_in(stack: Stack, browser: Browser) -> None:
    with fresh_context(browser) as context:
        page = context.new_page()
        page.goto(f"{stack.url}/ui/queue")
        expect(page).to_have_url(re.compile(r"/ui/login\?next=%2Fui%2Fqueue"))
        page.fill("#key", "rg_not-a-key")
        page.click("button[type=submit]")
        expect(page.locator("#login-message")).to_contain_text("not valid")
        # The review queue checks the key in its own page query, every other page before it: both refuse
        # a key revoked a moment ago (nothing caches a key).
        for name, leave_by in [
            ("short-lived", lambda: page.reload()),
            ("short-lived-2", lambda: page.get_by_role("link", name="Techniques").click()),
        ]:
            key, token = stack.store.create_api_key(name, Role.CURATOR, actor="e2e")
            sign_in(page, stack.url, token)
            expect(page.locator("#queue-items")).to_be_visible()
            stack.store.revoke_api_key(key.id, actor="e2e")
            leave_by()
            expect(page.locator("#login-message")).to_contain_text("no longer valid")
            page.goto(f"{stack.url}/ui/techniques")
            expect(page).to_have_url(re.compile(r"/ui/login"))


def test_sign_out_ends_the_session(stack: Stack, signed_in: SignedIn) -> None:
    with signed_in(Role.READER) as page:
        page.click("#sign-out")
        expect(page).to_have_url(re.compile(r"/ui/login"))
        page.goto(f"{stack.url}/ui/audit")
        expect(page).to_have_url(re.compile(r"/ui/login"))


# -- the review queue -------------------------------------------------------------------------------------


def test_curator_approves_rejects_and_splits_from_the_queue(stack: Stack, signed_in: SignedIn) -> None:
    # The task with the most pending examples: the queue filtered to it holds at least three.
    pending = stack.store.list_examples(status=ReviewStatus.PENDING, limit=1000)
    task = Counter(e.task_id for e in pending).most_common(1)[0][0]
    with signed_in(Role.CURATOR) as page:
        page.goto(f"{stack.url}/ui/queue?task={task}")
        first = page.locator("#example").get_attribute("data-example-id")
        assert first is not None
        page.keyboard.press("a")  # the approve shortcut
        expect(page.locator(".flash-ok")).to_contain_text(f"Approved example {first[:12]}")
        assert stack.store.get_example(first).review_status == ReviewStatus.APPROVED
        assert ("curator", "example.approved") in audit_of(stack, f"example:{first}")

        second = page.locator("#example").get_attribute("data-example-id")
        assert second is not None and second != first
        page.keyboard.press("r")  # focuses the reason
        page.keyboard.type("the after code ignores the tail of the last block")
        page.keyboard.press("Enter")
        page.click("#confirm")  # the rejection's confirm step
        expect(page.locator(".flash-ok")).to_contain_text(f"Rejected example {second[:12]}")
        rejected = stack.store.get_example(second)
        assert rejected.review_status == ReviewStatus.REJECTED
        assert rejected.review_reason == "the after code ignores the tail of the last block"

        third = page.locator("#example").get_attribute("data-example-id")
        assert third is not None and third not in (first, second)
        onto = next(n for n in techniques(stack)[4:] if n != stack.store.get_example(third).target)
        page.keyboard.press("s")
        page.keyboard.type(onto)
        page.keyboard.press("Enter")
        expect(page.locator(".flash-ok")).to_contain_text(onto)
        assert stack.store.get_example(third).target == onto
        assert first not in pending_ids(stack) and second not in pending_ids(stack)


def test_queue_filters_and_the_diff_is_highlighted(stack: Stack, signed_in: SignedIn) -> None:
    with signed_in(Role.READER) as page:
        page.select_option("select[name=transition]", f"{INITIAL_TECHNIQUE} -> Parallelization")
        expect(page).to_have_url(re.compile(r"transition="))
        items = page.locator("#queue-items li .t")
        expect(items.first).to_be_visible()  # the filtered page's list, parsed
        for text in items.all_inner_texts():
            assert text == f"{INITIAL_TECHNIQUE} → Parallelization"
        # CUDA keywords are highlighted, and the after side has inserted lines.
        expect(page.locator("#diff td.r .kt, #diff td.r .k").first).to_be_visible()
        assert page.locator("#diff tr.d-insert, #diff tr.d-replace").count() > 0
        page.fill("input[name=min_speedup]", "1000000")
        page.click("#filters button")
        expect(page.locator("#queue-empty")).to_be_visible()


def test_reader_and_forged_posts_are_refused(stack: Stack, signed_in: SignedIn) -> None:
    target = pending_ids(stack)[-1]
    with signed_in(Role.READER) as page:
        csrf = page.locator("body").get_attribute("data-csrf")
        answer = page.request.post(
            f"{stack.url}/ui/examples/{target}/review", form={"csrf": csrf or "", "decision": "approve"}
        )
        assert answer.status == 403 and "curator role" in answer.text()
    with signed_in(Role.CURATOR) as page:
        # A cross-site form post carries the cookie (when the browser sends it) but not the token.
        missing = page.request.post(f"{stack.url}/ui/examples/{target}/review", form={"decision": "approve"})
        assert missing.status == 403 and "CSRF token" in missing.text()
        csrf = page.locator("body").get_attribute("data-csrf")
        wrong = page.request.post(
            f"{stack.url}/ui/examples/{target}/review",
            form={"csrf": "x" + (csrf or ""), "decision": "approve"},
        )
        assert wrong.status == 403
        other_site = page.request.post(
            f"{stack.url}/ui/examples/{target}/review",
            form={"csrf": csrf or "", "decision": "approve"},
            headers={"Origin": "http://evil.example"},
        )
        assert other_site.status == 403 and "another site" in other_site.text()
    assert stack.store.get_example(target).review_status == ReviewStatus.PENDING
    assert audit_of(stack, f"example:{target}") == []


# -- techniques, the graph, relabel decisions -------------------------------------------------------------


def test_merge_techniques_and_see_the_graph_change(stack: Stack, signed_in: SignedIn) -> None:
    source, into = techniques(stack)[0:2]
    with signed_in(Role.CURATOR) as page:
        page.goto(f"{stack.url}/ui/graph")
        expect_graph_ready(page)
        before = int(page.locator("#graph-status").inner_text().split()[0])
        expect(page.locator(f'#graph-names option[value="{source}"]')).to_have_count(1)

        page.goto(f"{stack.url}/ui/technique?name={quote(source)}")
        page.click("#merge-technique summary")
        page.fill("#merge-into", into)
        page.click("#merge")
        page.click("#confirm")
        expect(page.locator("#technique-name")).to_have_text(into)
        expect(page.locator("#aliases")).to_contain_text(source)

        page.get_by_role("link", name="Graph", exact=True).click()
        expect_graph_ready(page)
        assert int(page.locator("#graph-status").inner_text().split()[0]) == before - 1
        expect(page.locator(f'#graph-names option[value="{source}"]')).to_have_count(0)
    assert ("curator", "technique.merge") in audit_of(stack, f"technique:{into}")


def test_rename_and_describe_a_technique(stack: Stack, signed_in: SignedIn) -> None:
    name = techniques(stack)[2]
    with signed_in(Role.CURATOR) as page:
        page.goto(f"{stack.url}/ui/technique?name={quote(name)}")
        page.click("#edit-technique summary")
        page.fill("#new-name", f"Renamed {name}")
        page.fill("#new-description", "Each thread accumulates into its own copy, merged once at the end.")
        page.click("#save-technique")
        expect(page.locator("#technique-name")).to_have_text(f"Renamed {name}")
        expect(page.locator("#description")).to_have_text(
            "Each thread accumulates into its own copy, merged once at the end."
        )
        expect(page.locator("#aliases")).to_contain_text(name)
    assert name in stack.store.get_technique(f"Renamed {name}").aliases


def _a_merge_decision(stack: Stack) -> str:
    """A relabel merge as construction records it (the seed graph, built on the taxonomy, needs none)."""
    technique = next(t.name for t in stack.store.list_techniques(limit=500) if t.name != INITIAL_TECHNIQUE)
    alias = f"e2e wording of {technique}"
    decision = RelabelDecision(
        id=f"e2e-{uuid.uuid4().hex[:12]}",
        candidate=alias,
        matched=technique,
        score=0.93,
        outcome=RelabelOutcome.MERGED,
        technique=technique,
        decided_by="model",
        at=utc_now(),
    )
    stack.store.ingest(
        IngestBatch(aliases=[AliasAddition(technique=technique, alias=alias)], decisions=[decision])
    )
    return decision.id


def test_undo_a_relabel_decision(stack: Stack, signed_in: SignedIn) -> None:
    decision_id = _a_merge_decision(stack)
    with signed_in(Role.CURATOR) as page:
        page.goto(f"{stack.url}/ui/relabel?outcome=merged")
        row = page.locator(f'#decisions tbody tr[data-id="{decision_id}"]')
        row.get_by_role("button", name="Undo").click()
        expect(page.locator(".flash-ok")).to_contain_text("Decision undone")
        expect(page.locator(f'#decisions tr[data-id="{decision_id}"]')).to_have_count(0)
    assert stack.store.get_decision(decision_id).undone_by == "curator"


# -- Cypher, jobs, audit ----------------------------------------------------------------------------------


def test_cypher_console_reads_and_refuses_a_write(stack: Stack, signed_in: SignedIn) -> None:
    with signed_in(Role.READER) as page:
        page.get_by_role("link", name="Cypher").click()
        page.locator("#cypher-examples a").first.click()
        # The default query holds MATCH too: wait for the example's page before running it.
        expect(page).to_have_url(re.compile(r"/ui/cypher\?example=0$"))
        expect(page.locator("#cypher-query")).to_contain_text("MATCH")
        page.click("#cypher-run")
        expect(page.locator("#cypher-result tbody tr").first).to_be_visible()
        assert page.locator("#cypher-result th").all_inner_texts() == ["source", "target", "examples"]

        page.fill("#cypher-query", "MATCH (t:Technique) SET t.name = 'gone' RETURN t")
        page.click("#cypher-run")
        expect(page.locator("#cypher-error")).to_contain_text("cypher_refused")
    assert stack.store.find_technique_by_label("gone") is None


def test_start_a_replayed_job_watch_its_events_and_cancel_it(stack: Stack, signed_in: SignedIn) -> None:
    with signed_in(Role.READER) as page:
        page.get_by_role("link", name="Jobs").click()
        page.fill("#job-task", JOB_TASK)
        page.fill("#job-budget", "50")
        page.click("#job-start")
        expect(page).to_have_url(re.compile(r"/ui/jobs/[0-9a-f]{32}$"))
        # The live stream: the queued and running states, then the search's start.
        expect(page.locator("#job-events li.ev-started")).to_have_count(1)
        page.click("#job-cancel")
        expect(page.locator("#job-state")).to_have_text("cancelled")
        expect(page.locator("#job-error")).to_contain_text("cancelled by a request")
        # The finished job's page replays its stored events, the cancellation last.
        expect(page.locator("#job-events li").last).to_have_text(re.compile(r"^state cancelled"))


def test_audit_log_filters_by_who_and_what(stack: Stack, signed_in: SignedIn) -> None:
    with signed_in(Role.READER) as page:
        page.get_by_role("link", name="Audit").click()
        page.select_option("select[name=actor]", "seed-graph")
        page.click("#audit-filters button")
        expect(page).to_have_url(re.compile(r"actor=seed-graph"))
        expect(page.locator("#audit tbody tr").first).to_be_visible()
        actors = page.locator("#audit tbody tr td:nth-child(2)").all_inner_texts()
        assert actors and set(actors) == {"seed-graph"}


def test_admin_creates_and_revokes_a_key(stack: Stack, signed_in: SignedIn) -> None:
    with signed_in(Role.ADMIN) as page:
        page.goto(f"{stack.url}/ui/admin")
        page.fill("#key-name", "new-reader")
        page.select_option("#key-role", "reader")
        page.click("#create-key button")
        token = page.locator("#new-token code").inner_text()
        assert stack.store.lookup_api_key(token).name == "new-reader"
        page.locator("#keys tr", has_text="new-reader").get_by_role("button", name="Revoke").click()
        expect(page.locator(".flash-ok")).to_contain_text("Key revoked")
        with page.expect_download() as download:
            page.click("#export")
        assert '"regraph.graph/v1"' in Path(download.value.path()).read_text()


# -- the relabel queue and likely duplicates --------------------------------------------------------------


def _a_queued_name(stack: Stack, near: str) -> tuple[str, str, str]:
    """A name the relabeler left undecided (its own technique, one example), `near` its best candidate."""
    return record_queued_name(stack.store, f"Qx{uuid.uuid4().hex[:8]} staged loads", near)


def _a_duplicate_pair(stack: Stack) -> tuple[str, str]:
    """Two techniques written alike (a hyphen apart): a certain likely-duplicate pair."""
    tag = uuid.uuid4().hex[:8]
    names = (f"Zq{tag}-level staging", f"Zq{tag} level staging")
    for name in names:
        stack.store.create_technique(Technique(name=name, created_at=utc_now()), actor="e2e")
    return names


# The first look at the likely duplicates after the techniques changed scores every pair again: seconds
# on an idle machine, far longer while the browser, the API and Neo4j share two loaded cores.
SCORING_MS = 180_000


def _pair_row(page: Page, pair: tuple[str, str]) -> Locator:
    a, b = pair
    return page.locator(
        f'#duplicates tr.pair[data-keep="{a}"][data-merge="{b}"], '
        f'#duplicates tr.pair[data-keep="{b}"][data-merge="{a}"]'
    )


def test_resolve_queued_names_by_merging_and_by_accepting(stack: Stack, signed_in: SignedIn) -> None:
    near = techniques(stack)[5]
    merged_id, merged_name, example_id = _a_queued_name(stack, near)
    accepted_id, accepted_name, _ = _a_queued_name(stack, near)
    with signed_in(Role.CURATOR) as page:
        page.get_by_role("link", name="Relabel queue").click()
        item = page.locator(f'section.queued[data-id="{merged_id}"]')
        expect(item.locator(".candidates")).to_contain_text(near)
        expect(item.locator(".code-evidence")).to_contain_text("shared_memory")
        # The merge field starts on the best candidate.
        expect(item.locator("input.merge-into")).to_have_value(near)
        item.get_by_role("button", name="Merge").click()
        page.click("#confirm")
        expect(page.locator(".flash-ok")).to_contain_text(f"Merged {merged_name!r} into {near!r}")
        expect(page.locator(f'section.queued[data-id="{merged_id}"]')).to_have_count(0)

        page.locator(f'section.queued[data-id="{accepted_id}"]').get_by_role(
            "button", name="Accept as new"
        ).click()
        expect(page.locator(".flash-ok")).to_contain_text(f"Accepted {accepted_name!r}")
        expect(page.locator(f'section.queued[data-id="{accepted_id}"]')).to_have_count(0)
    # The name and its example moved into the candidate; the accepted name is still a technique.
    assert stack.store.get_example(example_id).target == near
    assert merged_name in stack.store.get_technique(near).aliases
    assert stack.store.get_decision(merged_id).resolution == f"merged:{near}"
    assert stack.store.get_decision(accepted_id).resolution == "accepted"
    assert stack.store.get_technique(accepted_name).name == accepted_name
    assert ("curator", "relabel.resolve") in audit_of(stack, f"decision:{accepted_id}")


def test_merge_a_duplicate_pair_and_see_the_graph_change(stack: Stack, signed_in: SignedIn) -> None:
    pair = _a_duplicate_pair(stack)
    with signed_in(Role.CURATOR) as page:
        page.goto(f"{stack.url}/ui/graph")
        expect_graph_ready(page)
        before = int(page.locator("#graph-status").inner_text().split()[0])

        page.get_by_role("link", name="Duplicates").click()
        row = _pair_row(page, pair)
        expect(row).to_have_count(1, timeout=SCORING_MS)
        keep, merge = row.get_attribute("data-keep"), row.get_attribute("data-merge")
        assert {keep, merge} == set(pair)
        row.get_by_role("button", name="Merge").click()
        page.click("#confirm")
        expect(page.locator(".flash-ok")).to_contain_text(
            f"Merged {merge!r} into {keep!r}", timeout=SCORING_MS
        )
        expect(_pair_row(page, pair)).to_have_count(0)

        page.get_by_role("link", name="Graph", exact=True).click()
        expect_graph_ready(page)
        assert int(page.locator("#graph-status").inner_text().split()[0]) == before - 1
        expect(page.locator(f'#graph-names option[value="{merge}"]')).to_have_count(0)
    assert merge in stack.store.get_technique(str(keep)).aliases
    assert ("curator", "technique.merge") in audit_of(stack, f"technique:{keep}")


def test_keep_a_pair_separate_then_undo(stack: Stack, signed_in: SignedIn) -> None:
    pair = _a_duplicate_pair(stack)
    with signed_in(Role.CURATOR) as page:
        page.goto(f"{stack.url}/ui/duplicates", timeout=SCORING_MS)
        _pair_row(page, pair).get_by_role("button", name="Keep separate").click()
        expect(page.locator(".flash-ok")).to_contain_text("separate")
        expect(_pair_row(page, pair)).to_have_count(0)
        kept = page.locator(f'#kept-separate tr.kept[data-first="{min(pair)}"][data-second="{max(pair)}"]')
        expect(kept).to_have_count(1)
        assert (min(pair), max(pair)) in [(k.first, k.second) for k in stack.store.list_kept_separate()]
        # Still kept apart on a fresh load; undone, the pair is listed again.
        page.reload(timeout=SCORING_MS)
        expect(_pair_row(page, pair)).to_have_count(0)
        kept.get_by_role("button", name="Undo").click()
        expect(_pair_row(page, pair)).to_have_count(1)
    assert all(set(pair) != {k.first, k.second} for k in stack.store.list_kept_separate())


def test_relabel_pages_are_read_only_for_a_reader_and_refuse_forged_posts(
    stack: Stack, signed_in: SignedIn
) -> None:
    decision_id, name, _ = _a_queued_name(stack, techniques(stack)[6])
    pair = _a_duplicate_pair(stack)
    with signed_in(Role.READER) as page:
        page.goto(f"{stack.url}/ui/relabel-queue")
        expect(page.locator(f'section.queued[data-id="{decision_id}"]')).to_be_visible()
        expect(page.locator("#read-only-note")).to_be_visible()
        expect(page.locator("#relabel-queue button")).to_have_count(0)
        page.goto(f"{stack.url}/ui/duplicates", timeout=SCORING_MS)
        expect(_pair_row(page, pair)).to_have_count(1)
        expect(page.locator("#read-only-note")).to_be_visible()
        expect(page.locator("#duplicates button")).to_have_count(0)
        csrf = page.locator("body").get_attribute("data-csrf") or ""
        for path, form in [
            (f"/ui/relabel-queue/{decision_id}/accept", {}),
            ("/ui/duplicates/keep-separate", {"first": pair[0], "second": pair[1]}),
            ("/ui/duplicates/merge", {"keep": pair[0], "merge": pair[1]}),
        ]:
            answer = page.request.post(f"{stack.url}{path}", form={"csrf": csrf, **form})
            assert answer.status == 403 and "curator role" in answer.text(), path
    with signed_in(Role.CURATOR) as page:
        for path, form in [
            (f"/ui/relabel-queue/{decision_id}/merge", {"into": pair[0]}),
            ("/ui/duplicates/keep-separate", {"first": pair[0], "second": pair[1]}),
        ]:
            answer = page.request.post(f"{stack.url}{path}", form=form)  # no CSRF token
            assert answer.status == 403 and "CSRF token" in answer.text(), path
    assert stack.store.get_decision(decision_id).resolved_at is None
    assert stack.store.get_technique(name).name == name
    assert all(set(pair) != {k.first, k.second} for k in stack.store.list_kept_separate())
    assert {n for n in pair if stack.store.find_technique_by_label(n) is not None} == set(pair)
