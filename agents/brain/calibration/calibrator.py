"""Evidence → P(right): the learned calibrator the gate reads, and the 1–5 scale mapping.

Pure Python (no numpy at run time): an :class:`EvidenceCalibrator` is a JSON artefact —
a logistic model over the backend's evidence features followed by an isotonic map of
its output — fitted by ``manage.py calibrate`` (``agents.brain.calibration.fit``, scikit-learn)
from probe records (OS-Kairos §4.1 collaborative probing: the oracle is the teacher and
labels every step) and from operators' decisions on handoffs.

The gate compares γ with the OS-Kairos 1–5 scale, so the calibrated probability is put
back on that scale by a fixed, documented map (:func:`probability_to_score`): γ = 4 lets a
step act alone when P(right) ≥ 0.95 (the default target autonomy precision), γ = 5 when
P(right) ≥ 0.99. Evidence unlike anything in the calibration data (a rule, action or
overlay seen fewer than ``min_seen`` times, a number outside the fitted range) is capped
at ``unfamiliar_p`` (default 0.5 → score 2): a new kind of situation is asked about.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

FORMAT = "kairos-evidence-calibrator/1"

# OS-Kairos Eq. 4 asks when score < γ. Knots (P(right), score): 1 "certainly wrong",
# 2 "a coin toss", 3 "probably right" (P 0.8), 4 "confident" (P 0.95 — the default target
# autonomy precision, so γ = 4 means "act alone when right at least 95% of the time"),
# 5 "certain" (P 0.99). Linear between knots.
SCALE_KNOTS: tuple[tuple[float, float], ...] = (
    (0.0, 1.0), (0.5, 2.0), (0.8, 3.0), (0.95, 4.0), (0.99, 5.0), (1.0, 5.0))

# Features that cross the rule with another value: one logistic weight per rule and raw
# score lets "toggle at 5" and "click_best at 5" mean different things.
CROSSED = (("rule", "raw"), ("rule", "action"))
# Every phone has these: the launcher, the system UI and permission dialogs.
SYSTEM_PACKAGES = frozenset({"com.android.launcher3", "com.android.systemui",
                             "com.android.permissioncontroller", "android"})


def probability_to_score(p: float) -> float:
    """P(right) → the OS-Kairos 1–5 confidence (monotone, piecewise linear)."""
    p = min(1.0, max(0.0, float(p)))
    for (p0, s0), (p1, s1) in zip(SCALE_KNOTS, SCALE_KNOTS[1:]):
        if p <= p1:
            return s0 if p1 == p0 else s0 + (s1 - s0) * (p - p0) / (p1 - p0)
    return SCALE_KNOTS[-1][1]


def score_to_probability(score: float) -> float:
    """Inverse of :func:`probability_to_score` (the lowest P that reaches ``score``)."""
    score = min(5.0, max(1.0, float(score)))
    for (p0, s0), (p1, s1) in zip(SCALE_KNOTS, SCALE_KNOTS[1:]):
        if score <= s1 and s1 > s0:
            return p0 + (p1 - p0) * (score - s0) / (s1 - s0)
    return 1.0


def categorical_items(evidence: Mapping[str, Any]) -> dict[str, str]:
    """The evidence's category features, crosses included (``rule|raw`` = "toggle|5")."""
    items = {key: value for key, value in evidence.items() if isinstance(value, str)}
    for a, b in CROSSED:
        if a in evidence and b in evidence:
            items[f"{a}|{b}"] = f"{evidence[a]}|{_fmt(evidence[b])}"
    return items


def numeric_items(evidence: Mapping[str, Any]) -> dict[str, float]:
    """The evidence's number and yes/no features (booleans as 0/1)."""
    out: dict[str, float] = {}
    for key, value in evidence.items():
        if isinstance(value, bool):
            out[key] = 1.0 if value else 0.0
        elif isinstance(value, (int, float)) and math.isfinite(float(value)):
            out[key] = float(value)
    return out


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@dataclass
class EvidenceCalibrator:
    """A fitted map from a backend's evidence to P(right); see the module docstring.

    ``numeric``: feature → [mean, scale, min, max] (standardisation and the fitted
    range); ``categories``: feature → {value: count in the fitting data};
    ``weights``: "name" or "name=value" → logistic weight; ``isotonic``: (logistic
    probability, calibrated probability) knots, ascending.
    """

    backend: str
    numeric: dict[str, list[float]]
    categories: dict[str, dict[str, int]]
    weights: dict[str, float]
    intercept: float
    isotonic: list[tuple[float, float]]
    samples: int = 0
    min_seen: int = 5
    unfamiliar_p: float = 0.5
    meta: dict[str, Any] = field(default_factory=dict)
    # Apps (foreground packages) the fitting data covers, with their step counts, and
    # what the calibrator's confident steps were worth on apps it had *not* seen: measured
    # by refitting without each app in turn (``fit.unseen_app_precision``). A step on an
    # app outside ``apps`` is capped at ``unseen_app_p`` — the screen is new, and so is the
    # evidence's meaning there. None: no cap (too few apps to measure it).
    apps: dict[str, int] = field(default_factory=dict)
    unseen_app_p: float | None = None
    # What this kind of calibrator's probability was worth on apps left out of its fit
    # (``fit.unseen_app_measure``): isotonic knots (left-out P, share right). A step on an
    # unseen app reads its probability through them, then the cap. Empty: no map (a file
    # written before it existed reads as before).
    unseen_app_map: list[tuple[float, float]] = field(default_factory=list)
    # Each app's own record in the fitting data: [confident steps (P ≥ ``act_at``), right
    # ones]. An app whose record says confident evidence is worth less there than the
    # target (even its upper Wilson bound falls short) stays unfamiliar, however many of
    # its steps were logged. Empty: no records (files written before them read as before).
    app_records: dict[str, list[int]] = field(default_factory=dict)
    act_at: float = 0.95
    # Leave-one-out variants fitted without one suite (and the apps only it brings):
    # suite name → calibrator JSON. ``evaluate --calibrated`` judges a suite with its own.
    held_out: dict[str, dict[str, Any]] = field(default_factory=dict)

    # -- reading evidence --

    def logit(self, evidence: Mapping[str, Any]) -> float:
        total = self.intercept
        numbers = numeric_items(evidence)
        for name, (mean, scale, _, _) in self.numeric.items():
            if name in numbers:
                total += self.weights.get(name, 0.0) * (numbers[name] - mean) / (scale or 1.0)
            total += self.weights.get(f"{name}?missing", 0.0) * (0.0 if name in numbers else 1.0)
        for name, value in categorical_items(evidence).items():
            total += self.weights.get(f"{name}={value}", 0.0)
        return total

    def unseen_app(self, app: str | None) -> bool:
        """``app`` (a foreground package) is an app the fitting data showed fewer than
        ``min_seen`` times — a handful of approved handoffs do not make an app known — or
        one whose own record falls short (:meth:`falls_short`); the launcher and system
        dialogs belong to every phone and are always familiar."""
        if not app or not self.apps or self.unseen_app_p is None or app in SYSTEM_PACKAGES:
            return False
        return self.apps.get(app, 0) < self.min_seen or self.falls_short(app)

    def falls_short(self, app: str) -> bool:
        """The fitting data's confident steps on ``app`` were right so seldom that even the
        upper Wilson bound of their share is below ``act_at``: being in the data does not
        make this app familiar (operators kept editing there)."""
        record = self.app_records.get(app)
        return bool(record) and record[0] > 0 and wilson_interval(record[1], record[0])[1] < self.act_at

    def guesses_among_unseen_apps(self, evidence: Mapping[str, Any],
                                  installed: Iterable[str] = ()) -> bool:
        """An OPENAPP the goal does not name, on a phone where some installed app (a
        package in ``installed``) was never in the calibration data.

        Which app fits an unnamed goal was measured against the apps of the calibration
        data; an app it never saw may be the one the user means (a calendar beside the
        clock), so that choice is as unfamiliar as a step inside a new app. A goal that
        names the app (``names_target`` 1.0) keeps its calibrated probability — unless its
        name is only an everyday word there (``app_mention`` "word": "we don't need
        coffee anymore" beside a shopping-list app the calibrator never saw)."""
        if evidence.get("action") != "OPENAPP" or not self.apps or self.unseen_app_p is None:
            return False
        named = evidence.get("names_target")
        if (isinstance(named, (int, float)) and not isinstance(named, bool) and named >= 1.0
                and evidence.get("app_mention") != "word"):
            return False
        return any(self.unseen_app(package) for package in installed)

    def unfamiliar(self, evidence: Mapping[str, Any], app: str | None = None,
                   installed: Iterable[str] = ()) -> list[str]:
        """What in ``evidence`` (on ``app``, with the packages ``installed``) the
        calibration data did not cover (empty: familiar)."""
        reasons = []
        if self.unseen_app(app):
            if self.falls_short(app or ""):
                confident, right = self.app_records[app or ""]
                reasons.append(f"app {app}: its confident steps were right only "
                               f"{right}/{confident} times in the calibration data")
            else:
                reasons.append(f"app {app} not in the calibration data")
        elif self.guesses_among_unseen_apps(evidence, installed):
            reasons.append("opens an app the goal does not name as an app, on a phone "
                           "with apps not in the calibration data")
        if evidence.get("detected") and "detected" not in self.numeric:
            # Decided on elements read from a screenshot (issue 27), which the calibration
            # data never had: how often such steps are right is not known.
            reasons.append("decided on detected elements (OCR), not in the calibration data")
        for name, value in categorical_items(evidence).items():
            if "|" in name:
                continue  # a cross is unfamiliar only through its parts
            seen = self.categories.get(name)
            if seen is not None and seen.get(value, 0) < self.min_seen:
                reasons.append(f"{name}={value} seen {seen.get(value, 0)} times")
        numbers = numeric_items(evidence)
        for name, (_, _, low, high) in self.numeric.items():
            if name in numbers and not low <= numbers[name] <= high:
                reasons.append(f"{name}={numbers[name]:g} outside [{low:g}, {high:g}]")
        return reasons

    def probability(self, evidence: Mapping[str, Any], app: str | None = None,
                    installed: Iterable[str] = ()) -> float:
        """Calibrated P(right | evidence), capped where the evidence is unfamiliar; where
        ``app`` (the foreground package) was never seen, or an app the goal does not name
        is chosen among ``installed`` packages some of which were never seen, read through
        the unseen-app map and then capped."""
        z = max(-30.0, min(30.0, self.logit(evidence)))
        p = _interpolate(self.isotonic, 1.0 / (1.0 + math.exp(-z)))
        if self.unfamiliar(evidence):
            p = min(p, self.unfamiliar_p)
        unseen = self.unseen_app(app)
        if unseen or self.guesses_among_unseen_apps(evidence, installed):
            # A step inside an unseen app, or a choice among apps some of which were never
            # seen: both read what left-out apps earned at this probability, then the cap.
            assert self.unseen_app_p is not None
            if self.unseen_app_map:
                p = _interpolate(self.unseen_app_map, p)
            p = min(p, self.unseen_app_p)
        if app and self.falls_short(app):
            confident, right = self.app_records[app]
            p = min(p, wilson_interval(right, confident)[1])  # at most what its record allows
        return p

    def confidence(self, evidence: Mapping[str, Any], app: str | None = None,
                   installed: Iterable[str] = ()) -> float:
        """The calibrated 1–5 confidence the gate compares with γ."""
        return probability_to_score(self.probability(evidence, app, installed))

    # -- the artefact --

    @property
    def version(self) -> str:
        """``<backend>-<12 hex digits>``: a digest of the fitted parameters, so two
        installations with the same version read evidence identically."""
        body = json.dumps(self._body(), sort_keys=True, separators=(",", ":"))
        return f"{self.backend}-{hashlib.sha256(body.encode()).hexdigest()[:12]}"

    def _body(self) -> dict[str, Any]:
        body = {
            "backend": self.backend, "numeric": self.numeric, "categories": self.categories,
            "weights": {k: round(v, 6) for k, v in sorted(self.weights.items())},
            "intercept": round(self.intercept, 6),
            "isotonic": [[round(x, 6), round(y, 6)] for x, y in self.isotonic],
            "samples": self.samples, "min_seen": self.min_seen, "unfamiliar_p": self.unfamiliar_p,
            "apps": dict(sorted(self.apps.items())), "unseen_app_p": self.unseen_app_p,
        }
        if self.unseen_app_map:  # absent from files written before it: same version
            body["unseen_app_map"] = [[round(x, 6), round(y, 6)] for x, y in self.unseen_app_map]
        if self.app_records:  # likewise
            body["app_records"] = {k: list(v) for k, v in sorted(self.app_records.items())}
            body["act_at"] = self.act_at
        return body

    def to_json(self) -> dict[str, Any]:
        data = {"format": FORMAT, "version": self.version, **self._body(), "meta": self.meta}
        if self.held_out:
            data["held_out"] = self.held_out
        return data

    def for_suite(self, suite: str) -> "EvidenceCalibrator":
        """The variant fitted without ``suite`` (itself when the suite was not in the
        fitting data: then every judgement of it is out of sample anyway)."""
        variant = self.held_out.get(suite)
        return EvidenceCalibrator.from_json(variant) if variant else self

    @classmethod
    def from_json(cls, data: Any, *, where: str = "calibrator") -> "EvidenceCalibrator":
        """Inverse of :meth:`to_json`; ``ValueError`` naming ``where`` on a bad artefact."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{where}: not a Kairos evidence calibrator (format {FORMAT!r})")
        try:
            calibrator = cls(
                backend=str(data["backend"]),
                numeric={str(k): [float(x) for x in v] for k, v in data["numeric"].items()},
                categories={str(k): {str(a): int(b) for a, b in v.items()}
                            for k, v in data["categories"].items()},
                weights={str(k): float(v) for k, v in data["weights"].items()},
                intercept=float(data["intercept"]),
                isotonic=[(float(x), float(y)) for x, y in data["isotonic"]],
                samples=int(data.get("samples", 0)),
                min_seen=int(data.get("min_seen", 5)),
                unfamiliar_p=float(data.get("unfamiliar_p", 0.5)),
                meta=dict(data.get("meta") or {}),
                apps={str(k): int(v) for k, v in (data.get("apps") or {}).items()},
                unseen_app_p=(None if data.get("unseen_app_p") is None
                              else float(data["unseen_app_p"])),
                held_out=dict(data.get("held_out") or {}),
                unseen_app_map=[(float(x), float(y))
                                for x, y in (data.get("unseen_app_map") or [])],
                app_records={str(k): [int(v[0]), int(v[1])]
                             for k, v in (data.get("app_records") or {}).items()},
                act_at=float(data.get("act_at", 0.95)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{where}: malformed calibrator ({exc!r})") from None
        if any(not 0 <= right <= confident for confident, right in calibrator.app_records.values()):
            raise ValueError(f"{where}: app_records need [confident, right] with right ≤ confident")
        if any(len(v) != 4 for v in calibrator.numeric.values()):
            raise ValueError(f"{where}: numeric features need [mean, scale, min, max]")
        for knots in (calibrator.isotonic, calibrator.unseen_app_map):
            if knots != sorted(knots) or any(not 0 <= y <= 1 for _, y in knots):
                raise ValueError(f"{where}: isotonic knots must ascend and lie in [0, 1]")
        stated = data.get("version")
        if stated and stated != calibrator.version:
            raise ValueError(f"{where}: version {stated} does not match its parameters "
                             f"({calibrator.version}); the file was edited or damaged")
        return calibrator

    @classmethod
    def load(cls, path: str | Path) -> "EvidenceCalibrator":
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except OSError as exc:
            raise ValueError(f"{path}: cannot read ({exc.strerror})") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not JSON ({exc})") from None
        return cls.from_json(data, where=str(path))

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1, sort_keys=True) + "\n")
        return path


def wilson_interval(right: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval (95 % by default) for right / n; (0, 1) without steps."""
    if n == 0:
        return 0.0, 1.0
    phat = right / n
    centre = phat + z * z / (2 * n)
    spread = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n), (centre + spread) / (1 + z * z / n)


def _interpolate(knots: list[tuple[float, float]], x: float) -> float:
    if not knots:
        return x
    if x <= knots[0][0]:
        return knots[0][1]
    if x >= knots[-1][0]:
        return knots[-1][1]
    for (x0, y0), (x1, y1) in zip(knots, knots[1:]):
        if x0 <= x <= x1:
            return y1 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return knots[-1][1]
