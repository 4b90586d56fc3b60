"""The port probe that `regraph up` and the embedded server use to tell a busy port from a free one."""

from __future__ import annotations

import socket
import time

from graphdb.embedded import port_is_free


def _listener() -> socket.socket:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server


def test_a_port_left_in_time_wait_by_a_stopped_server_counts_as_free() -> None:
    # A server that closes its end first (as Neo4j does on shutdown) leaves TIME_WAIT entries on
    # its own port; a new server binds it at once, so the probe must not call it busy.
    server = _listener()
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    assert not port_is_free("127.0.0.1", port)  # listening: busy
    accepted.close()
    time.sleep(0.05)
    client.close()
    server.close()
    plain = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        plain.bind(("127.0.0.1", port))
        lingering = False
    except OSError:
        lingering = True  # the TIME_WAIT entry is there: the case this test is about
    finally:
        plain.close()
    assert lingering
    assert port_is_free("127.0.0.1", port)
    # ...and a live listener on the same port is still reported busy.
    again = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    again.bind(("127.0.0.1", port))
    again.listen()
    try:
        assert not port_is_free("127.0.0.1", port)
    finally:
        again.close()
