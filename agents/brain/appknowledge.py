"""What a phone's standard apps are for, without the phone saying so (issue 27).

Pure Python (no Django). A real phone lists packages and launcher labels only; the
simulator's apps describe themselves. The offline agent matches goals to apps by what
they are for (the heuristic's ``_app_match`` reads ``AppInfo.description``), so before a
step the apps of a phone are given the everyday knowledge a model has of Android's
standard apps, kept as data the devices layer owns (:mod:`devices.android_apps`):
matched by package first (Google, AOSP, Samsung, Xiaomi… names), then by launcher label,
so another vendor's Clock is still a clock. An app the data does not know keeps its label only: it is found when the goal
names it, and otherwise nothing claims it fits (the agent asks).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from devices.android_apps import known
from devices.protocol import AppInfo


def purpose(app: AppInfo) -> str:
    """What ``app`` is for: its own description (simulated apps), else the knowledge."""
    if app.description:
        return app.description
    entry = known(app.package, app.name)
    return entry.purpose if entry else ""


def with_purposes(apps: Iterable[AppInfo]) -> tuple[AppInfo, ...]:
    """``apps`` with each empty description filled from the knowledge (others unchanged)."""
    return tuple(app if app.description else replace(app, description=purpose(app))
                 for app in apps)
