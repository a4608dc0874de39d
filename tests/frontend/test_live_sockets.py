"""Refused sockets on a real server (uvicorn, as ``serve`` runs it): the handshake
succeeds and the close code says why — not an HTTP 403 a page cannot tell from a network
failure (issue 11.5)."""
from __future__ import annotations

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect


def _close_code(url: str, origin: str) -> int | None:
    with connect(url, origin=origin, open_timeout=10) as socket:
        with pytest.raises(ConnectionClosed) as closed:
            socket.recv(timeout=10)
    return closed.value.rcvd.code if closed.value.rcvd else None


def test_an_anonymous_socket_is_opened_then_closed_with_4401(kairos_server):
    ws = kairos_server.url.replace("http://", "ws://")
    assert _close_code(ws + "/ws/operator/", kairos_server.url) == 4401


def test_a_socket_from_another_sites_page_is_opened_then_closed_with_4403(kairos_server):
    ws = kairos_server.url.replace("http://", "ws://")
    assert _close_code(ws + "/ws/operator/", "https://evil.example") == 4403
