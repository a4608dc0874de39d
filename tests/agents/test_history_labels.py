"""The item a step names, once tapped, is not replaced by its look-alike.

Found on fresh4_errands (read 2026-11-25, fourth session): after opening "Red Lentil Dal"
and going back, the heuristic opened its look-alike "Red Lentil Soup" at confidence 4 —
the best match left once the tapped one was excluded. The tapped one now stays the
runner-up, so the look-alike is a guess (2), not a clear match.
"""
from __future__ import annotations

from devices.actions import PRESS_BACK, Action
from tests.agents.screens import HandBuiltPhone

KITCHEN = """
app: {id: kitchen, name: Kitchen, package: com.example.kitchen, start: recipes,
      description: Recipes and a shopping list}
state: {dal_listed: false, soup_listed: false}
screens:
  recipes:
    title: Recipes
    elements:
      - kind: list
        id: recipe_list
        items:
          - {id: rls_row, text: Red Lentil Soup, subtitle: 35 min, on_tap: {go: soup}}
          - {id: rld_row, text: Red Lentil Dal, subtitle: 40 min, on_tap: {go: dal}}
          - {id: gc_row, text: Green Curry, subtitle: 30 min, on_tap: {go: soup}}
  dal:
    title: Red Lentil Dal
    elements:
      - {kind: button, id: dal_add, text: Add to shopping list, on_tap: {set: {dal_listed: true}}}
  soup:
    title: Red Lentil Soup
    elements:
      - {kind: button, id: soup_add, text: Add to shopping list, on_tap: {set: {soup_listed: true}}}
"""
SUITE = """
suite: kitchen
tasks:
  - {id: dal, instruction: put the red lentil dal stuff on my shopping list, success: kitchen.dal_listed}
"""


def test_the_look_alike_of_a_row_already_tapped_is_not_taken_for_it(tmp_path):
    phone = HandBuiltPhone(tmp_path, KITCHEN, SUITE, "dal", "Kitchen")
    phone.tap("rld row")  # the row has no text of its own: the history names it by id
    phone.do(Action(PRESS_BACK))
    proposal = phone.propose()
    assert not (proposal.action is not None and proposal.action.element == "Red Lentil Soup"
                and proposal.confidence >= 4), proposal.thought
