"""App and suite files: loading, located errors, the condition language, bundled suites."""
from __future__ import annotations

import pytest

from devices.sim import SimLoadError, bundled_suite_names, find_suite, load_app, load_suite
from devices.sim.expr import ExprError, parse

GOOD_APP = """
app: {id: coffee, name: Coffee}
state: {size: null}
screens:
  order:
    elements:
      - {kind: text, text: Order}
      - {kind: buton, text: Place order}
"""


def _load(tmp_path, text: str, name: str = "coffee.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return load_app(path)


def _error(tmp_path, text: str, name: str = "coffee.yaml") -> str:
    with pytest.raises(SimLoadError) as info:
        _load(tmp_path, text, name)
    return str(info.value)


def test_unknown_element_kind_names_the_file_and_place(tmp_path):
    message = _error(tmp_path, GOOD_APP)
    assert "coffee.yaml: screens.order.elements[1]: unknown element kind 'buton'" in message


def test_broken_yaml_names_the_line(tmp_path):
    message = _error(tmp_path, "app: {id: x, name: X\nscreens: [\n")
    assert "coffee.yaml:" in message and "not valid YAML" in message


@pytest.mark.parametrize("body, place, words", [
    ("""
app: {name: A}
screens:
  main:
    elements:
      - {kind: button, text: Go, on_tap: {go: nowhere}}
""", "screens.main.elements[0].on_tap.go", "no screen 'nowhere'"),
    ("""
app: {name: A}
state: {wifi: true}
screens:
  main:
    elements:
      - {kind: text, text: Hi, visible: "wfi == true"}
""", "screens.main.elements[0].visible", "unknown variable 'wfi'"),
    ("""
app: {name: A}
screens:
  main:
    elements:
      - {kind: button, text: Go, on_tapp: back}
""", "screens.main.elements[0]", "unknown key 'on_tapp'"),
    ("""
app: {name: A}
state: {size: null}
screens:
  main:
    elements:
      - {kind: radio_group, text: Size, var: size}
""", "screens.main.elements[0].options", "needs a list of options"),
    ("""
app: {name: A}
state: {lamp: true}
screens:
  main:
    elements:
      - {kind: switch, text: Lamp, var: lamp, on_change: [{toggle: lights}]}
""", "screens.main.elements[0].on_change[0].toggle", "unknown variable 'lights'"),
    ("""
app: {name: A}
screens:
  main:
    elements:
      - {kind: text, text: Hi, visible: "x ==="}
""", "screens.main.elements[0].visible", "bad condition"),
])
def test_mistakes_in_app_files_are_located(tmp_path, body, place, words):
    message = _error(tmp_path, body, "a.yaml")
    assert f"a.yaml: {place}:" in message
    assert words in message


def _suite_error(tmp_path, text: str) -> str:
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    with pytest.raises(SimLoadError) as info:
        load_suite(path)
    return str(info.value)


def test_suite_with_a_typo_in_its_predicate_fails_to_load(tmp_path):
    message = _suite_error(tmp_path, """
tasks:
  - {id: t, instruction: Turn wifi off, success: settings.wfi == false}
""")
    assert "suite.yaml: tasks[0].success: unknown variable 'settings.wfi'" in message


def test_suite_with_an_unknown_perturbation_or_missing_instruction_fails(tmp_path):
    message = _suite_error(tmp_path, """
tasks:
  - {id: t, instruction: x, perturbations: [{kind: earthquake, app: settings}]}
""")
    assert "tasks[0].perturbations[0]: unknown perturbation kind 'earthquake'" in message
    message = _suite_error(tmp_path, "tasks:\n  - {id: t}\n")
    assert "tasks[0].instruction: is required" in message
    message = _suite_error(tmp_path, """
tasks:
  - {id: t, instruction: x, perturbations: [{kind: loading, app: Tetris}]}
""")
    assert "tasks[0].perturbations[0].app: no installed app 'Tetris'" in message


def test_conditions_combine_and_compare():
    values = {"a": True, "b": False, "n": 3, "s": "Less Sweet", "z": None}
    env = values.get
    assert parse("a and not b")(env)
    assert parse("b or n >= 3")(env)
    assert not parse("not (a or b)")(env)
    assert parse('s ~= "less sweet "')(env)
    assert not parse('s == "less sweet"')(env)
    assert parse('s contains "sweet"')(env)
    assert parse("z == null and n != 4")(env)
    assert parse("a == true and b == false")(env)
    expr = parse('s == "x" or s == "y"')
    assert expr.strings == ("x", "y") and expr.names == {"s"}
    with pytest.raises(ExprError):
        parse("a and")


def test_bundled_suites_resolve_by_name_and_by_path():
    assert {"toggles", "complex", "everyday"} <= set(bundled_suite_names())
    toggles = find_suite("toggles")
    assert len(toggles.tasks) >= 16
    assert any("verify" in t.tags for t in toggles.tasks)
    composite = toggles.task("wifi_off_then_bluetooth_on")
    assert composite.instruction == "Turn off WiFi, then enable bluetooth"
    again = find_suite(toggles.path)
    assert [t.id for t in again.tasks] == [t.id for t in toggles.tasks]
    with pytest.raises(SimLoadError, match="no suite 'nope'"):
        find_suite("nope")


def test_hidden_preference_answers_only_what_it_is_about():
    task = find_suite("complex").task("iced_americano")
    assert task.is_ambiguous
    assert task.answer("How sweet would you like it?") == "No sugar"
    assert task.answer("Which size do you want?") == "A large one"
    plain = find_suite("complex").task("mocha_fully_specified")
    assert plain.answer("Which size?").startswith("No preference")


def test_suite_can_bring_its_own_apps(tmp_path):
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "notes.yaml").write_text("""
app: {id: notes, name: Notes}
state: {saved: false}
screens:
  main:
    elements: [{kind: button, text: Save, on_tap: {set: {saved: true}}}]
""")
    path = tmp_path / "suite.yaml"
    path.write_text("""
suite: mine
apps: [apps/notes.yaml]
tasks:
  - {id: save, instruction: Save the note, success: notes.saved and settings.wifi}
  - {id: demo, instruction: Anything you like}
""")
    suite = load_suite(path)
    assert suite.name == "mine"
    assert {"notes", "settings"} <= set(suite.bundle.by_id)
    assert not suite.task("demo").has_predicate


def test_a_task_marks_sensitive_elements_by_id(tmp_path):
    suite = find_suite("home")
    assert suite.task("remove_sam").sensitive == ("remove_sam_confirm",)
    assert suite.task("lock_front_door").sensitive == ()
    message = _suite_error(tmp_path, """
tasks:
  - {id: t, instruction: Unlock it, success: settings.wifi, sensitive: [unlock_buton]}
""")
    assert "tasks[0].sensitive[0]" in message and "no app has an element 'unlock_buton'" in message
    message = _suite_error(tmp_path, """
tasks:
  - {id: t, instruction: Unlock it, success: settings.wifi, sensitive: wifi_switch}
""")
    assert "expected a list of element ids" in message
