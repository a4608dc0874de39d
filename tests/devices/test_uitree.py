"""Parsing a real ``uiautomator dump`` into the node list every device reports."""
from __future__ import annotations

import pytest

from devices.uitree import (
    UINode, UITreeError, node_at, nodes_from_json, nodes_to_json, parse_uiautomator_xml,
)

DUMP = """<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>
<hierarchy rotation="0">
  <node index="0" text="" resource-id="" class="android.widget.FrameLayout"
        package="com.android.settings" content-desc="" checkable="false" checked="false"
        clickable="false" enabled="true" focusable="false" focused="false" scrollable="false"
        long-clickable="false" password="false" selected="false" bounds="[0,0][1080,2400]">
    <node index="0" text="" resource-id="com.android.settings:id/list"
          class="androidx.recyclerview.widget.RecyclerView" package="com.android.settings"
          content-desc="" checkable="false" checked="false" clickable="false" enabled="true"
          focusable="true" focused="false" scrollable="true" long-clickable="false"
          password="false" selected="false" bounds="[0,200][1080,2200]">
      <node index="0" text="Wi‑Fi" resource-id="android:id/title" class="android.widget.TextView"
            package="com.android.settings" content-desc="" checkable="false" checked="false"
            clickable="false" enabled="true" focusable="false" focused="false"
            scrollable="false" long-clickable="false" password="false" selected="false"
            bounds="[48,240][400,300]" />
      <node index="1" text="" resource-id="android:id/switch_widget" class="android.widget.Switch"
            package="com.android.settings" content-desc="Wi‑Fi" checkable="true" checked="true"
            clickable="true" enabled="true" focusable="true" focused="false" scrollable="false"
            long-clickable="false" password="false" selected="false" bounds="[900,230][1032,310]" />
      <node NAF="true" index="2" text="" resource-id="" class="android.widget.ImageButton"
            package="com.android.settings" content-desc="" checkable="false" checked="false"
            clickable="true" enabled="true" focusable="true" focused="false" scrollable="false"
            long-clickable="true" password="true" selected="true" bounds="[0,400][120,520]" />
    </node>
  </node>
</hierarchy>"""


def test_a_dump_becomes_a_flat_list_in_document_order_with_parents():
    nodes = parse_uiautomator_xml(DUMP)
    assert [n.short_class for n in nodes] == [
        "FrameLayout", "RecyclerView", "TextView", "Switch", "ImageButton"]
    assert [n.parent for n in nodes] == [None, 0, 1, 1, 1]
    assert [n.depth for n in nodes] == [0, 1, 2, 2, 2]


def test_attributes_and_bounds_are_read():
    switch = parse_uiautomator_xml(DUMP)[3]
    assert switch.bounds == (900, 230, 1032, 310) and switch.center == (966, 270)
    assert switch.checkable and switch.checked and switch.clickable and not switch.scrollable
    assert switch.content_desc == "Wi‑Fi" and switch.resource_id == "android:id/switch_widget"
    assert switch.label == "Wi‑Fi" and switch.key == "android:id/switch_widget"
    listing = parse_uiautomator_xml(DUMP)[1]
    assert listing.scrollable and listing.focusable


def test_naf_and_the_remaining_flags_are_kept():
    button = parse_uiautomator_xml(DUMP)[4]
    assert button.naf and button.long_clickable and button.password and button.selected
    assert button.key == "node-4"


def test_the_json_form_uses_uiautomator_names_and_reads_back():
    nodes = parse_uiautomator_xml(DUMP)
    data = nodes_to_json(nodes)
    assert data[3]["class"] == "android.widget.Switch"
    assert data[3]["bounds"] == "[900,230][1032,310]" and data[3]["content-desc"] == "Wi‑Fi"
    assert data[4]["NAF"] is True and data[3]["long-clickable"] is False
    assert nodes_to_json(nodes_from_json(data)) == data


def test_a_touch_hits_the_smallest_node_under_it():
    nodes = parse_uiautomator_xml(DUMP)
    assert node_at(nodes, 950, 260).short_class == "Switch"
    assert node_at(nodes, 200, 270, clickable_only=True) is None
    assert node_at(nodes, 10, 2300).short_class == "FrameLayout"


@pytest.mark.parametrize("xml, fragment", [
    ("not xml at all", "not a uiautomator dump"),
    ("<html><body/></html>", "root element is <html>"),
    ('<hierarchy><node bounds="[0,0][10]"/></hierarchy>', "bad bounds"),
])
def test_bad_dumps_get_a_clear_error(xml, fragment):
    with pytest.raises(UITreeError, match=fragment):
        parse_uiautomator_xml(xml)


def test_a_bare_node_root_is_accepted():
    nodes = parse_uiautomator_xml(
        '<node class="android.widget.Button" text="OK" bounds="[0,0][10,10]"/>')
    assert nodes == [UINode(index=0, cls="android.widget.Button", text="OK", bounds=(0, 0, 10, 10))]
