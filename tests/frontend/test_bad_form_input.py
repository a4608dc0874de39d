"""The pages' forms take the same hostile input as the API and answer with a message,
never a 500 (issue 11.10: the console's edit form, the task and chat forms)."""
from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from agents.models import Message, Task
from tests.world import build_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    return build_world()


def _as(user) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.mark.parametrize("x", ["inf", "1e400", "-Infinity", "9" * 400, "nan"])
def test_an_edit_with_an_impossible_coordinate_is_explained_on_the_ticket_page(world, x):
    client = _as(world.users["operator"])
    response = client.post(f"/console/tickets/{world.params['ticket_id']}/act",
                           {"decision": "edit", "type": "CLICK", "x": x, "y": "5"})
    assert response.status_code == 302 and "/console/tickets/" in response["Location"]
    shown = [str(m) for m in get_messages(response.wsgi_request)]
    assert any("needs an integer 'x'" in m for m in shown), shown


def test_a_nul_byte_in_the_task_and_chat_forms_is_refused_with_a_message(world):
    # (A browser's form cannot carry a lone surrogate: it is sent as UTF-8.)
    bad = "\x00"
    client = _as(world.users["owner"])
    before = Task.objects.count()
    response = client.post("/tasks/", {"instruction": f"Turn on Wi-Fi{bad}", "device": "sim-2"})
    assert response.status_code == 400 and Task.objects.count() == before
    response = client.post("/tasks/", {"instruction": "Turn on Wi-Fi", "device": f"sim-2{bad}"})
    assert response.status_code == 404 and Task.objects.count() == before
    response = client.post(f"/tasks/{world.params['task_id']}/", {"text": f"hi{bad}"})
    assert response.status_code == 302 and not Message.objects.filter(text__startswith="hi")
