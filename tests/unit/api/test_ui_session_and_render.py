"""The curation workspace's pure parts: sessions (idle expiry, sign-out, CSRF comparison), the
side-by-side diff with CUDA highlighting, and the parsing of the documented Cypher examples."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from api.cypher.ui import cypher_examples
from api.ui.render import fmt_waited, highlighted_lines, side_by_side
from api.ui.session import SessionStore, tokens_match
from tests.integration.api.test_cypher_api import doc_queries


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_expires_after_its_idle_time_and_each_request_restarts_the_clock() -> None:
    clock = Clock()
    sessions = SessionStore(ttl_s=60, clock=clock)
    session = sessions.create("rg_token")
    clock.now += 59
    assert sessions.get(session.id) is session
    clock.now += 59  # 59 s after the last request, 118 s after sign-in: still live
    assert sessions.get(session.id) is session
    clock.now += 61
    assert sessions.get(session.id) is None
    assert sessions.get(session.id) is None  # and gone for good


def test_sign_out_ends_only_that_session_and_ids_are_unguessable() -> None:
    sessions = SessionStore(ttl_s=60)
    one, two = sessions.create("rg_a"), sessions.create("rg_a")
    assert one.id != two.id and one.csrf != two.csrf and len(one.id) >= 40
    sessions.end(one.id)
    assert sessions.get(one.id) is None and sessions.get(two.id) is two
    assert sessions.get(None) is None and sessions.get("") is None


def test_csrf_tokens_must_match_exactly() -> None:
    assert tokens_match("abc", "abc")
    assert not tokens_match("abc", "abd")
    assert not tokens_match("abc", None)
    assert not tokens_match("abc", "")


def test_highlighting_keeps_one_entry_per_line_and_escapes_the_code() -> None:
    code = '/* a\n   comment */\n__global__ void k(int* p) { if (p[0] < 1) return; }\n"<b>"\n'
    lines = highlighted_lines(code)
    assert len(lines) == len(code.splitlines()) == 4
    assert lines[0].startswith('<span class="c') and lines[1].startswith('<span class="c')
    assert '<span class="k' in lines[2]  # a keyword of CUDA/C++
    assert "&lt;b&gt;" in lines[3] and "<b>" not in lines[3]


def test_side_by_side_pairs_changed_lines_and_pads_the_shorter_side() -> None:
    before = "int a;\nint b;\nint c;\n"
    after = "int a;\nlong b;\nint x;\nint y;\nint c;\n"
    rows = side_by_side(before, after)
    assert [r.kind for r in rows] == ["equal", "replace", "insert", "insert", "equal"]
    assert [(r.left_no, r.right_no) for r in rows] == [(1, 1), (2, 2), (None, 3), (None, 4), (3, 5)]
    assert rows[1].left is not None and "b" in rows[1].left and rows[2].left is None


def test_the_console_offers_every_documented_query() -> None:
    offered = cypher_examples()
    documented = doc_queries()
    assert [e["title"] for e in offered] == [q.title for q in documented]
    assert [e["query"] for e in offered] == [q.query.strip() for q in documented]


def test_a_wait_reads_in_its_two_largest_units() -> None:
    now = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    assert fmt_waited(now - timedelta(days=3, hours=4, minutes=5), now) == "3 d 4 h"
    assert fmt_waited(now - timedelta(hours=5, minutes=2, seconds=30), now) == "5 h 2 min"
    assert fmt_waited(now - timedelta(minutes=12), now) == "12 min"
    assert fmt_waited(now - timedelta(seconds=20), now) == "under a minute"
    assert fmt_waited(now + timedelta(minutes=3), now) == "under a minute"  # a clock a little ahead
    assert fmt_waited(None, now) == "–"
