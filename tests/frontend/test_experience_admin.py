"""Admins see per app what the installation learned, forget an app, export and import it
(issue 25); every change is audited and bad input is a 4xx with a JSON ``detail``."""
from __future__ import annotations

import html
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from agents.brain.experience.memory import CONFIRM, CONTRADICT, MemoryStore, remember, step_key
from agents.runtime.experience_store import DbStore
from agents.runtime.models import ExperienceEntry
from devices.actions import Action
from devices.sim import SimDevice, find_suite
from access.audit import AuditEntry

pytestmark = pytest.mark.django_db
HOMELY = "devices/sim/suites/streams1_homely.yaml"
APP = "com.streams1.homely"


@pytest.fixture
def learned(db):
    """Homely's lights: "turn on the porch light" confirmed twice, a wrong tap corrected."""
    suite = find_suite(HOMELY)
    device = SimDevice("admin", apps=suite.bundle)
    device.reset(suite.task("hm01"))
    device.perform(Action("OPENAPP", app="Homely"))
    nodes = device.observe().nodes
    lights = next(n for n in nodes if n.text == "Lights")
    climate = next(n for n in nodes if n.text == "Climate")
    store = DbStore()
    opened = step_key(Action("OPENAPP", app="Homely"), "", "")  # the step before: open it
    for said in ("turn on the porch light", "porch light on"):
        remember(store, app=APP, nodes=nodes, instruction=said, polarity=CONFIRM,
                 action=Action("CLICK", x=lights.center[0], y=lights.center[1]),
                 source="approve", prev=opened)
    remember(store, app=APP, nodes=nodes, instruction="porch light on", polarity=CONTRADICT,
             action=Action("CLICK", x=climate.center[0], y=climate.center[1]), source="edit",
             prev=opened)
    return nodes


def text(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def test_the_page_shows_per_app_what_was_learned(client, demo, learned):
    client.force_login(demo["admin"])
    page = client.get("/review/experience/").content.decode()
    row = text(re.search(rf'<tr data-app="{APP}">(.*?)</tr>', page, re.S).group(1))
    assert row.startswith(f" {APP} 3 2 1 2 0 ")  # steps, confirmations, corrections, decisions
    detail = text(client.get("/review/experience/", {"app": APP}).content.decode())
    assert "CLICK 'Lights' 2 0" in detail and "CLICK 'Climate' 0 1" in detail
    assert "“turn on the porch light”" in detail
    assert client.get("/review/experience/", {"app": "com.nobody"}).status_code == 404
    assert client.get("/review/experience/", {"app": ""}).status_code == 400


def test_forgetting_an_app_removes_it_and_is_audited(client, demo, learned):
    client.force_login(demo["admin"])
    response = client.post("/review/experience/forget", {"app": APP})
    assert response.status_code == 302
    assert not ExperienceEntry.objects.filter(app=APP).exists()
    audit = AuditEntry.objects.get(action="experience.forget")
    assert audit.actor == demo["admin"] and audit.target == f"app {APP}"
    assert audit.changes == {"entries": [3, 0]}


@pytest.mark.parametrize("body, status, words", [
    ({}, 400, "app"),
    ({"app": "   "}, 400, "app"),
    ({"app": "x" * 200}, 400, "app"),
    ({"app": "com.never.learned"}, 404, "nothing learned"),
    ({"app": "com.a\x00b"}, 400, "app"),
])
def test_forget_refuses_bad_input_with_a_reason(client, demo, learned, body, status, words):
    client.force_login(demo["admin"])
    response = client.post("/review/experience/forget", body)
    # NUL is refused before the view, on every page, by a 400 that names the field.
    said = response.json()["detail"] if response["Content-Type"] == "application/json" \
        else response.content.decode()
    assert response.status_code == status and words in said
    assert ExperienceEntry.objects.filter(app=APP).count() == 3


def test_export_then_import_seeds_another_installation(client, demo, learned):
    client.force_login(demo["admin"])
    exported = client.get("/review/experience/export.json", {"app": APP})
    assert exported.status_code == 200 and "attachment" in exported["Content-Disposition"]
    data = exported.json()
    assert data["format"] == "kairos-experience/1" and len(data["entries"]) == 3
    client.post("/review/experience/forget", {"app": APP})

    upload = SimpleUploadedFile("x.json", json.dumps(data).encode(), "application/json")
    assert client.post("/review/experience/import", {"file": upload}).status_code == 302
    assert ExperienceEntry.objects.filter(app=APP).count() == 3
    assert ExperienceEntry.objects.filter(app=APP, by=demo["admin"]).count() == 3
    assert AuditEntry.objects.filter(action="experience.import").get().changes == {
        "entries": [0, 3]}
    assert AuditEntry.objects.filter(action="experience.export").exists()
    # the imported memory works: the same lookup as before the round trip
    from agents.brain.experience.memory import lookup, step_key

    prev = step_key(Action("OPENAPP", app="Homely"), "", "switch the kitchen light on")
    best = lookup(DbStore(), APP, learned, "switch the kitchen light on", prev=prev).best
    assert best is not None and best.confirmed == 2


@pytest.mark.parametrize("content, words", [
    (b"\xff\xfe not text", "not JSON"),
    (b"{not json", "not JSON"),
    (b'{"format": "other/1"}', "kairos-experience/1"),
    (json.dumps({"format": "kairos-experience/1", "app": APP, "entries": {}}).encode(),
     "lists"),
    (json.dumps({"format": "kairos-experience/1", "app": APP,
                 "entries": [{"app": APP}]}).encode(), "entries[0]"),
    (json.dumps({"format": "kairos-experience/1", "app": APP,
                 "entries": [{"app": "com.other", "signature": "s", "instruction": "i",
                              "action": {"type": "PRESS_BACK"}}]}).encode(), "is not"),
    (json.dumps({"format": "kairos-experience/1", "app": APP,
                 "entries": [{"app": APP, "signature": "s", "instruction": "i",
                              "action": {"type": "PRESS_BACK"}, "polarity": 7}]}).encode(),
     "polarity"),
    (json.dumps({"format": "kairos-experience/1", "app": APP,
                 "entries": [{"app": APP, "signature": "s", "instruction": "a\x00b",
                              "action": {"type": "PRESS_BACK"}}]}).encode(), "NUL"),
])
def test_import_refuses_bad_files_and_writes_nothing(client, demo, content, words):
    client.force_login(demo["admin"])
    upload = SimpleUploadedFile("x.json", content, "application/json")
    response = client.post("/review/experience/import", {"file": upload})
    assert response.status_code == 400 and words in response.json()["detail"]
    assert not ExperienceEntry.objects.exists()
    assert not AuditEntry.objects.filter(action="experience.import").exists()


def test_export_needs_an_app_that_was_learned(client, demo, learned):
    client.force_login(demo["admin"])
    assert client.get("/review/experience/export.json").json()["detail"].startswith("app")
    assert client.get("/review/experience/export.json", {"app": "com.x"}).status_code == 404
    assert client.get("/review/experience/export.json", {"app": "a\x00"}).status_code == 400
    assert client.get("/review/experience/", {"app": "a\x00"}).status_code == 400
    assert client.post("/review/experience/import").json()["detail"].startswith("file")


def test_memory_store_and_database_store_agree(learned):
    """The same remembered steps match the same way in memory and in the database."""
    from agents.brain.experience.memory import lookup, step_key

    store = MemoryStore()
    for row in ExperienceEntry.objects.all():
        from agents.brain.experience.memory import Entry

        store.add(Entry.from_json({"app": row.app, "signature": row.signature,
                                   "tokens": row.tokens, "fields": row.fields,
                                   "instruction": row.instruction, "action": row.action,
                                   "pre": row.pre, "polarity": row.polarity,
                                   "source": row.source, "task": f"r{row.id}"}))
    said = "turn on the hallway light"
    prev = step_key(Action("OPENAPP", app="Homely"), "", said)
    a = lookup(store, APP, learned, said, prev=prev)
    b = lookup(DbStore(), APP, learned, said, prev=prev)
    assert a.matches
    assert [(m.template.key(), m.confirmed, m.contradicted) for m in a.matches] == [
        (m.template.key(), m.confirmed, m.contradicted) for m in b.matches]
