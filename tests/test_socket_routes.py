"""Unknown WebSocket paths are refused like every other socket (issue 23.5): accepted,
then closed with 4404 — never an HTTP 500 with a traceback — whoever asks."""
from __future__ import annotations

import pytest

from tests.websockets import connect

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("path", [
    "/ws/nope/", "/ws/operator", "/ws/tasks/not-a-uuid/", "/ws/", "/", "/ws/devices/x/screen/",
    "/ws/tasks/00000000-0000-0000-0000-000000000000/extra/",
])
@pytest.mark.parametrize("who", [None, "operator"])
async def test_an_unknown_socket_path_is_closed_with_4404(path, who, demo):
    _, code = await connect(path, demo[who] if who else None, refused=True)
    assert code == 4404


async def test_an_unknown_path_from_another_site_is_still_refused_as_such(demo):
    _, code = await connect("/ws/nope/", None, refused=True, origin=b"http://evil.example")
    assert code == 4403
