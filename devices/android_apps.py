"""What Android's standard apps are called, their packages and what they are for, as
data (``android_apps.yaml``, issue 27).

Pure Python. A real phone lists packages and launcher labels only; the devices layer
reads this data to name a phone's apps (:mod:`devices.adb.driver`), and the agent's
brain to know what each is for (:mod:`agents.brain.appknowledge`). Matched by package
first (Google, AOSP, Samsung, Xiaomi… names), then by launcher label, so another
vendor's Clock is still a clock.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import yaml

DATA = Path(__file__).with_name("android_apps.yaml")


@dataclass(frozen=True)
class KnownApp:
    label: str
    labels: tuple[str, ...]
    packages: tuple[str, ...]
    purpose: str


def _norm(label: str) -> str:
    return " ".join(label.lower().replace("&", " and ").split())


@functools.lru_cache(maxsize=None)
def knowledge(path: str = str(DATA)) -> tuple[KnownApp, ...]:
    """Every app the data knows, in file order; a malformed file raises ValueError."""
    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle) or {}
    entries = data.get("apps") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a top-level 'apps' list")
    apps = []
    for n, entry in enumerate(entries):
        if not isinstance(entry, dict) or not entry.get("label") or not entry.get("purpose"):
            raise ValueError(f"{path}: apps[{n}] needs a label and a purpose")
        label = str(entry["label"])
        labels = tuple(dict.fromkeys([label, *(str(x) for x in entry.get("labels") or [])]))
        apps.append(KnownApp(label, labels, tuple(str(p) for p in entry.get("packages") or []),
                             " ".join(str(entry["purpose"]).split())))
    return tuple(apps)


@functools.lru_cache(maxsize=None)
def _indexes() -> tuple[dict[str, KnownApp], dict[str, KnownApp]]:
    by_package: dict[str, KnownApp] = {}
    by_label: dict[str, KnownApp] = {}
    for app in knowledge():
        for package in app.packages:
            by_package.setdefault(package, app)
        for label in app.labels:
            by_label.setdefault(_norm(label), app)
    return by_package, by_label


def known(package: str = "", label: str = "") -> KnownApp | None:
    """The standard app with this package, else with this launcher label, else None."""
    by_package, by_label = _indexes()
    return by_package.get(package) or by_label.get(_norm(label or ""))


def label_for_package(package: str) -> str | None:
    """The launcher label a known package usually has (None: not a known package)."""
    app = _indexes()[0].get(package)
    return app.label if app else None
