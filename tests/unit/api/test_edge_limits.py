"""The pure parts of the HTTP edge (issue 27): who a client is, who gets in when a cap is reached, which
names may enter the graph, when the /ui cookies are Secure."""

from __future__ import annotations

import time

import pytest

from api.connections import ConnectionLedger, _Watched, client_key
from api.settings import ApiSettings
from graphdb.models import check_name


class Connection(_Watched):
    def __init__(self, ledger: ConnectionLedger, client: str, idle_for_s: float | None) -> None:
        self.ledger, self.client = ledger, client
        self.since = None if idle_for_s is None else time.monotonic() - idle_for_s
        self.evicted = False

    def waiting_since(self) -> float | None:
        return self.since

    def evict(self) -> None:
        self.evicted = True
        self.ledger.release(self.client, self)


def test_a_client_is_its_address_and_an_ipv6_client_its_64() -> None:
    assert client_key("127.0.0.2") == "127.0.0.2"
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::9") == "2001:db8:1:2::/64"
    assert client_key("::ffff:10.0.0.1") == "10.0.0.1"
    assert client_key(None) == "unknown"


def test_past_a_cap_the_idlest_connection_makes_room_or_the_new_one_is_refused() -> None:
    ledger = ConnectionLedger(max_total=4, max_per_client=2, min_idle_s=1.0)
    busy, idle = Connection(ledger, "a", None), Connection(ledger, "a", 5.0)
    assert ledger.admit("a", busy) is None and ledger.admit("a", idle) is None
    third = Connection(ledger, "a", None)
    assert ledger.admit("a", third) is None and idle.evicted  # the idle one made room
    assert ledger.admit("a", Connection(ledger, "a", None)) == "client"  # nobody idle left
    fresh = [Connection(ledger, "b", 0.1), Connection(ledger, "b", 0.1)]
    assert all(ledger.admit("b", c) is None for c in fresh) and ledger.total == 4
    assert ledger.admit("c", Connection(ledger, "c", None)) == "total"  # idle, but not for 1 s yet
    fresh[0].since = time.monotonic() - 3.0
    assert ledger.admit("c", Connection(ledger, "c", None)) is None and fresh[0].evicted
    assert ledger.total == 4


@pytest.mark.parametrize(
    "name", ["a\x00b", "tab\there", "rtl\u202eoverride", "iso\u2067late", "x" * 201, " "]
)
def test_names_with_controls_direction_marks_or_too_long_are_refused(name: str) -> None:
    with pytest.raises(ValueError):
        check_name(name)


def test_ordinary_names_pass() -> None:
    for name in ["Shared memory tiling", "Precomputation / lookup table", "Réduction en arbre", "共有メモリ"]:
        assert check_name(name) == name


def test_the_workspace_cookies_are_secure_unless_plain_http_on_loopback() -> None:
    assert ApiSettings().ui_secure_cookie
    assert not ApiSettings(ui_plain_http=True).ui_secure_cookie
    assert not ApiSettings(ui_plain_http=True, host="::1").ui_secure_cookie
    assert ApiSettings(ui_plain_http=True, host="0.0.0.0").ui_secure_cookie
    assert ApiSettings(ui_plain_http=True, host="10.1.2.3").ui_secure_cookie
