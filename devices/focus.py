"""A phone left on a focused text field, where every TYPE changes the screen: what the
streaming benchmarks type into to time a change until its frame (``bench stream``, the
fake adb phone's ``--drive-hz``)."""
from __future__ import annotations

from typing import Any

from devices.actions import Action


class NoTextField(RuntimeError):
    """No app on the phone has a text field whose typing changes the screen."""


def focus_text_field(phone: Any) -> None:
    """Leave ``phone`` on a focused text field where every TYPE changes the screen.

    Works through the device protocol only (observe/perform), so it serves any phone. Apps
    may open behind a modal prompt (Maps asks for the location first) that swallows keys:
    each app with a text field is tried, a prompt is dismissed with BACK, and the field is
    accepted only once two different texts typed into it both changed the screen.
    """
    for app in phone.info.apps:
        phone.perform(Action("PRESS_HOME"))
        phone.perform(Action("OPENAPP", app=app.name))
        for _ in range(3):
            field = next((n for n in phone.observe().nodes if "Edit" in n.short_class), None)
            if field is None:
                break
            phone.perform(Action("CLICK", x=field.center[0], y=field.center[1]))
            if all(phone.perform(Action("TYPE", text=f"bench focus {n}")).changed
                   for n in (1, 2)):
                return
            phone.perform(Action("PRESS_BACK"))  # a prompt in the way: dismiss it, retry
    raise NoTextField(f"no app on {phone.info.name} has a text field whose typing "
                      "changes the screen")
