"""Component Recommendation (RecAgent §3.3): recall the target, cut the list, honour exclusions."""
from __future__ import annotations

from agents.brain.planning import estimate_tokens
from agents.brain.elements import is_candidate, node_label
from agents.brain.recommend import format_elements, recommend
from agents.brain.text import tokens
from tests.agents.screens import HEIGHT, WIDTH, settings_screen

BLUETOOTH = "com.android.settings:id/bluetooth_switch"
WIFI = "com.android.settings:id/wifi_switch"


def test_it_keeps_the_target_and_halves_the_prompt() -> None:
    nodes = settings_screen(wifi_on=True, filler=12).nodes
    rec = recommend(nodes, "Turn off Bluetooth")
    assert BLUETOOTH in rec.keys
    full = format_elements([n for n in nodes if is_candidate(n)], WIDTH, HEIGHT)
    short = format_elements(rec.nodes, WIDTH, HEIGHT)
    assert estimate_tokens(short) <= 0.5 * estimate_tokens(full)


def test_it_ranks_the_named_element_first() -> None:
    nodes = settings_screen(wifi_on=False).nodes
    rec = recommend(nodes, "open the battery settings")
    assert node_label(rec.nodes[0], nodes) == "Battery"
    assert rec.scores[rec.nodes[0].key] == max(rec.scores.values())


def test_it_folds_synonyms_into_the_keyword_pathway() -> None:
    rec = recommend(settings_screen(wifi_on=False).nodes, "enable WLAN")
    assert WIFI in rec.by_pathway["keyword"]
    assert WIFI in rec.keys
    assert tokens("Turn on Wi-Fi") == tokens("enable wlan")


def test_it_recalls_near_misses_through_the_semantic_pathway() -> None:
    rec = recommend(settings_screen(wifi_on=False).nodes, "show the batery level")
    assert any(n.text == "Battery" for n in rec.nodes)
    assert "node-" in " ".join(rec.by_pathway["semantic"])


def test_it_removes_elements_that_failed_earlier() -> None:
    nodes = settings_screen(wifi_on=False).nodes
    rec = recommend(nodes, "Turn on Wi-Fi", excluded={WIFI})
    assert WIFI not in rec.keys
    assert all(WIFI not in keys for keys in rec.by_pathway.values())


def test_it_returns_at_most_k_elements() -> None:
    nodes = settings_screen(wifi_on=False, filler=12).nodes
    # "settings" names nothing specific, so every row is a fallback candidate.
    three = recommend(nodes, "do something", k=3)
    assert len(three.elements) == 3 and len(three.scores) == 3
    one = recommend(nodes, "Turn on Wi-Fi and Bluetooth", k=1)
    assert len(one.elements) == 1
    # a row's own label text travels with it, without counting towards k
    assert all(n.parent == one.elements[0].index or n is one.elements[0] for n in one.nodes)


def test_it_unions_the_llm_pathway_and_survives_its_failure() -> None:
    nodes = settings_screen(wifi_on=False).nodes
    storage = next(n for n in nodes if n.text == "Storage")

    storage_row = next(n for n in nodes if n.index == storage.parent)
    rec = recommend(nodes, "Turn on Wi-Fi", llm_pathway=lambda ns, goal: [storage.key, "nope"])
    assert storage.key in rec.keys and WIFI in rec.keys
    # the LLM named the row's text; the element recalled is the row that owns it
    assert rec.by_pathway["llm"] == [storage_row.key]

    def broken(ns: object, goal: str) -> list[str]:
        raise RuntimeError("model down")

    assert WIFI in recommend(nodes, "Turn on Wi-Fi", llm_pathway=broken).keys


def test_it_falls_back_to_actionable_nodes_when_nothing_matches() -> None:
    rec = recommend(settings_screen(wifi_on=False).nodes, "zzz qqq")
    assert rec.nodes and "fallback" in rec.by_pathway


def test_format_elements_shows_state_and_os_atlas_coordinates() -> None:
    nodes = settings_screen(wifi_on=True).nodes
    switch = next(n for n in nodes if n.resource_id == WIFI)
    line = format_elements([switch], WIDTH, HEIGHT)
    # centre (955, 280) of a 1080x2400 screen → (884, 117) in 0–1000
    assert line == f"#{switch.index} Switch \"wifi switch\" ON @(884,117)"
    off = format_elements([n for n in settings_screen(wifi_on=False).nodes if n.resource_id == WIFI],
                          WIDTH, HEIGHT)
    assert " OFF " in off


def test_it_keeps_fields_and_buttons_the_goal_does_not_name() -> None:
    from tests.agents.screens import ScreenBuilder

    s = ScreenBuilder("com.example.messages")
    for i, name in enumerate(["Mom", "Alex Chen", "Sam Patel", "Work group", "Dr Lee"]):
        row = s.add("android.widget.LinearLayout", bounds=(0, 300 + 200 * i, WIDTH, 500 + 200 * i),
                    clickable=True, resource_id=f"com.example.messages:id/thread_{i}")
        s.text(name, 320 + 200 * i, parent=row)
    body = s.add("android.widget.EditText", text="Text message", clickable=True,
                 extra={"hint": "Text message"}, bounds=(40, 1400, 880, 1520))
    send = s.button("Send", 1400, left=900, width=160)
    nodes = s.observation().nodes
    rec = recommend(nodes, "Text Alex Chen: running late")
    kept = {n.index for n in rec.nodes}
    assert {body, send} <= kept
    assert any(n.text == "Alex Chen" for n in rec.nodes)
    assert not any(n.text == "Work group" for n in rec.nodes)
