"""Fitting an :class:`EvidenceCalibrator` from labelled steps, and judging one.

scikit-learn does the fitting (a regularised ``LogisticRegression`` over the evidence
features, then ``IsotonicRegression`` of its output on the labels); the result is stored
as plain JSON so the installation needs no numpy to read it. Also here: the expected
calibration error, the Wilson lower bound and the γ suggestion for a target autonomy
precision, all on the calibrated 1–5 scale.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from agents.brain.calibration.calibrator import (
    EvidenceCalibrator, categorical_items, numeric_items, probability_to_score, wilson_interval,
)

MIN_SAMPLES = 20


@dataclass(frozen=True)
class Labelled:
    """One labelled step: the evidence, whether the action was right, and where it came
    from (``suite``: the probe suite or ``"logs"``; ``app``: the foreground package)."""

    evidence: Mapping[str, Any]
    right: bool
    suite: str = ""
    app: str = ""


def labelled_from_records(records: Iterable[Mapping[str, Any]]) -> list[Labelled]:
    """Probe / log records (JSON lines) → :class:`Labelled`; records without evidence or
    without a verdict are skipped."""
    out = []
    for record in records:
        evidence = record.get("evidence")
        right = record.get("right")
        if not isinstance(evidence, dict) or not evidence or not isinstance(right, bool):
            continue
        out.append(Labelled(evidence, right, str(record.get("suite") or ""),
                            str(record.get("app") or "")))
    return out


def fit_calibrator(samples: Sequence[Labelled], backend: str, *, min_seen: int = 5,
                   unfamiliar_p: float = 0.5, regularisation: float = 1.0,
                   meta: dict[str, Any] | None = None, min_samples: int = MIN_SAMPLES,
                   cross_fit: bool = False) -> EvidenceCalibrator:
    """Fit evidence → P(right) on ``samples``; ``ValueError`` with too few or one-class data."""
    import numpy as np
    from sklearn.isotonic import IsotonicRegression
    from sklearn.linear_model import LogisticRegression

    if len(samples) < min_samples:
        raise ValueError(f"too little data: {len(samples)} labelled steps (at least "
                         f"{min_samples} needed)")
    labels = np.array([1 if s.right else 0 for s in samples])
    if labels.min() == labels.max():
        raise ValueError("every labelled step has the same verdict; a calibrator needs "
                         "both right and wrong steps")
    numbers = [numeric_items(s.evidence) for s in samples]
    cats = [categorical_items(s.evidence) for s in samples]
    numeric: dict[str, list[float]] = {}
    for name in sorted({k for row in numbers for k in row}):
        values = np.array([row[name] for row in numbers if name in row])
        scale = float(values.std()) or 1.0
        numeric[name] = [float(values.mean()), scale, float(values.min()), float(values.max())]
    categories: dict[str, dict[str, int]] = {}
    for row in cats:
        for name, value in row.items():
            categories.setdefault(name, {})
            categories[name][value] = categories[name].get(value, 0) + 1
    columns: list[str] = []
    for name in numeric:
        columns.append(name)
        if any(name not in row for row in numbers):
            columns.append(f"{name}?missing")
    for name, values in sorted(categories.items()):
        columns.extend(f"{name}={value}" for value in sorted(values))
    index = {c: i for i, c in enumerate(columns)}
    matrix = np.zeros((len(samples), len(columns)))
    for r, (nums, cat) in enumerate(zip(numbers, cats)):
        for name, (mean, scale, _, _) in numeric.items():
            if name in nums:
                matrix[r, index[name]] = (nums[name] - mean) / scale
            elif f"{name}?missing" in index:
                matrix[r, index[f"{name}?missing"]] = 1.0
        for name, value in cat.items():
            matrix[r, index[f"{name}={value}"]] = 1.0
    model = LogisticRegression(C=regularisation, max_iter=2000)
    model.fit(matrix, labels)
    raw = (_cross_fitted(matrix, labels, [s.suite for s in samples], regularisation)
           if cross_fit else None)
    if raw is None:
        raw = model.predict_proba(matrix)[:, 1]
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
    iso.fit(raw, labels)
    knots = _smoothed_knots(list(iso.X_thresholds_), list(iso.y_thresholds_), raw, labels)
    weights = {c: float(w) for c, w in zip(columns, model.coef_[0]) if abs(w) > 1e-9}
    # Categories keep their counts so that rare ones read as unfamiliar at run time.
    calibrator = EvidenceCalibrator(
        backend=backend, numeric=numeric,
        categories={k: v for k, v in categories.items() if "|" not in k},
        weights=weights, intercept=float(model.intercept_[0]), isotonic=knots,
        samples=len(samples), min_seen=min_seen, unfamiliar_p=unfamiliar_p,
        meta=dict(meta or {}), apps=_app_counts(samples),
    )
    calibrator.app_records = app_records(calibrator, samples)
    return calibrator


def app_records(calibrator: EvidenceCalibrator, samples: Iterable[Labelled]
                ) -> dict[str, list[int]]:
    """Per app (the launcher and system dialogs aside): [steps the calibrator reads as
    confident (P ≥ ``act_at``), how many of them were right]."""
    from agents.brain.calibration.calibrator import SYSTEM_PACKAGES

    records: dict[str, list[int]] = {}
    for sample in samples:
        if not sample.app or sample.app in SYSTEM_PACKAGES:
            continue
        record = records.setdefault(sample.app, [0, 0])
        if calibrator.probability(sample.evidence) >= calibrator.act_at:
            record[0] += 1
            record[1] += int(sample.right)
    return records


def _app_counts(samples: Iterable[Labelled]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for sample in samples:
        if sample.app:
            counts[sample.app] = counts.get(sample.app, 0) + 1
    return counts


def unseen_app_precision(samples: Sequence[Labelled], backend: str, *, act_at: float = 0.95,
                         min_app_steps: int = 20, **fit_options: Any) -> float | None:
    """What confident evidence is worth on an app the calibrator never saw: the cap of
    :func:`unseen_app_measure` alone."""
    return unseen_app_measure(samples, backend, act_at=act_at, min_app_steps=min_app_steps,
                              **fit_options)[0]


def unseen_app_measure(samples: Sequence[Labelled], backend: str, *, act_at: float = 0.95,
                       min_app_steps: int = 20, **fit_options: Any
                       ) -> tuple[float | None, list[tuple[float, float]]]:
    """(cap, map) for steps on an app the calibrator never saw, measured leaving each app
    out in turn.

    For each app with at least ``min_app_steps`` steps (the launcher and system dialogs
    aside), a calibrator is fitted without that app's steps and judges them. Pooled over
    the apps, those judgements say what a probability means on an app the fit never saw:

    * the **cap**: the steps it would let act alone at γ = 4 (P ≥ ``act_at``), and the
      lower bound of their share right (Wilson, 95 %) — a new app acts alone only once
      the apps measured show, beyond chance, that confident evidence is right that often
      there;
    * the **map**: an isotonic fit of right / wrong on the left-out probability (blocks
      smoothed by Laplace's rule, as the calibrator's own layer), so a step on a new app
      reads the probability such steps earned on apps left out — fitted on the apps it
      knows, a calibrator is too sure at both ends on an app it does not (P 0.14 was right
      a third of the time there, P 0.95 six times in seven).

    (None, []) with fewer than two such apps (nothing to measure it on)."""
    from agents.brain.calibration.calibrator import SYSTEM_PACKAGES

    apps = [app for app, n in _app_counts(samples).items()
            if n >= min_app_steps and app not in SYSTEM_PACKAGES]
    if len(apps) < 2:
        return None, []
    pairs: list[tuple[float, bool]] = []
    for app in apps:
        fitting = [s for s in samples if s.app != app]
        try:
            without = fit_calibrator(fitting, backend, **fit_options)
        except ValueError:
            continue
        pairs.extend((without.probability(s.evidence), s.right) for s in samples if s.app == app)
    confident = [right for p, right in pairs if p >= act_at]
    cap = wilson_lower(sum(confident), len(confident)) if confident else 0.5
    return cap, unseen_map(pairs)


def unseen_map(pairs: Sequence[tuple[float, bool]]) -> list[tuple[float, float]]:
    """Isotonic knots (left-out P → share right), Laplace-smoothed; [] with one class."""
    import numpy as np
    from sklearn.isotonic import IsotonicRegression

    if len({right for _, right in pairs}) < 2:
        return []
    raw = np.array([p for p, _ in pairs])
    labels = np.array([1 if right else 0 for _, right in pairs])
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(raw, labels)
    return _smoothed_knots(list(iso.X_thresholds_), list(iso.y_thresholds_), raw, labels)


def _cross_fitted(matrix: Any, labels: Any, groups: list[str], regularisation: float) -> Any:
    """Each step's logistic probability from a model fitted *without its suite*.

    The isotonic layer is fitted on these, not on in-sample scores, so the final
    probabilities say how often a claim was right on suites the model had not seen — the
    situation of an installation meeting its own apps (grouped cross-fitting, as
    scikit-learn's CalibratedClassifierCV does with a group-aware split). None with fewer
    than three suites or a fold that lacks one of the classes.

    Off by default (``calibrate --cross-fit``): measured on the team's suites
    (docs/evaluation.md) it pools the most confident evidence of every suite into one
    block just under P 0.95, so at γ = 4 every step asks — honest, but no autonomy."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    names = sorted(set(groups))
    if len(names) < 3:
        return None
    out = np.zeros(len(labels))
    group_array = np.array(groups)
    for name in names:
        held = group_array == name
        rest = ~held
        if labels[rest].min() == labels[rest].max():
            return None
        fold = LogisticRegression(C=regularisation, max_iter=2000)
        fold.fit(matrix[rest], labels[rest])
        out[held] = fold.predict_proba(matrix[held])[:, 1]
    return out


def _smoothed_knots(xs: list[float], ys: list[float], raw: Any, labels: Any
                    ) -> list[tuple[float, float]]:
    """Isotonic knots with each block's value pulled towards ½ by Laplace's rule
    ((right + 1) / (n + 2)), so a block of 12 right steps claims 0.93, not certainty;
    then made monotone again. Knots are deduplicated by x."""
    blocks: dict[float, list[int]] = {}
    for x, y in zip(raw, labels):
        # The block of x: the isotonic value it was fitted to.
        value = float(_interp(xs, ys, float(x)))
        entry = blocks.setdefault(round(value, 9), [0, 0])
        entry[0] += 1
        entry[1] += int(y)
    smoothed_of = {v: (r + 1) / (n + 2) for v, (n, r) in blocks.items()}
    out: list[tuple[float, float]] = []
    for x, y in zip(xs, ys):
        p = smoothed_of.get(round(float(y), 9), float(y))
        if out and out[-1][0] == x:
            out[-1] = (x, max(out[-1][1], p))
        else:
            out.append((float(x), p))
    best = 0.0
    monotone = []
    for x, p in out:
        best = max(best, p)
        monotone.append((x, best))
    return monotone


def _interp(xs: list[float], ys: list[float], x: float) -> float:
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    for x0, y0, x1, y1 in zip(xs, ys, xs[1:], ys[1:]):
        if x0 <= x <= x1:
            return y1 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return ys[-1]


# --- leave-one-out ----------------------------------------------------------------------


def held_out_split(samples: Sequence[Labelled], suite: str, own_apps: Iterable[str] = ()
                   ) -> tuple[list[Labelled], list[Labelled]]:
    """(fitting, judged) for ``suite``: the judged steps are the suite's own; the fitting
    steps are every other suite's, minus any step on an app only ``suite`` brings
    (``own_apps``: packages) — leave-one-app-out, so a new app is judged by a calibrator
    that never saw it."""
    apps = set(own_apps)
    judged = [s for s in samples if s.suite == suite]
    fitting = [s for s in samples if s.suite != suite and s.app not in apps]
    return fitting, judged


# --- judging ----------------------------------------------------------------------------


def expected_calibration_error(pairs: Iterable[tuple[float, bool]], bins: int = 10) -> float | None:
    """ECE: Σ_b (n_b / n) · |mean P(right) − observed share right| over ``bins``
    equal-width probability bins. None without pairs."""
    pairs = list(pairs)
    if not pairs:
        return None
    groups: dict[int, list[tuple[float, bool]]] = {}
    for p, right in pairs:
        groups.setdefault(min(bins - 1, int(p * bins)), []).append((p, right))
    total = len(pairs)
    return sum(len(g) / total * abs(sum(p for p, _ in g) / len(g) - sum(r for _, r in g) / len(g))
               for g in groups.values())


def ece_by_chance(probabilities: Sequence[float], bins: int = 10, draws: int = 400,
                  seed: int = 0) -> float | None:
    """The ECE a *perfectly* calibrated confidence would still show, by chance, on this
    many steps with these probabilities: the 95th percentile of the ECE over ``draws``
    simulated verdicts (each step right with its own probability). An observed ECE at or
    below it is no evidence of miscalibration at this sample size; on a suite of a few
    dozen steps the estimator alone reads 0.05–0.10. Deterministic (seeded). None
    without probabilities."""
    import random

    probabilities = [min(1.0, max(0.0, float(p))) for p in probabilities]
    if not probabilities:
        return None
    rng = random.Random(seed)
    values = sorted(
        expected_calibration_error([(p, rng.random() < p) for p in probabilities], bins) or 0.0
        for _ in range(draws))
    return values[min(len(values) - 1, int(0.95 * len(values)))]


def reliability_bins(pairs: Iterable[tuple[float, bool]], bins: int = 10) -> list[dict[str, float]]:
    """Per probability bin: steps, mean predicted P(right), observed share right."""
    groups: dict[int, list[tuple[float, bool]]] = {}
    for p, right in pairs:
        groups.setdefault(min(bins - 1, int(p * bins)), []).append((p, right))
    return [{"low": b / bins, "high": (b + 1) / bins, "steps": len(g),
             "predicted": sum(p for p, _ in g) / len(g), "observed": sum(r for _, r in g) / len(g)}
            for b, g in sorted(groups.items())]


def wilson_lower(right: int, n: int, z: float = 1.96) -> float:
    """Lower bound of the Wilson score interval (95% by default) for right / n."""
    return wilson_interval(right, n, z)[0]


@dataclass
class GammaSuggestion:
    gamma: float | None  # None: no γ reaches the target on this data
    target: float
    acting: int  # steps that would act alone (score ≥ γ)
    precision: float | None  # observed autonomy precision of those
    lower_bound: float | None
    interventions_per_step: float  # share of steps that would ask


def suggest_gamma(scored: Sequence[tuple[float, bool]], target: float = 0.95) -> GammaSuggestion:
    """The smallest γ (on the calibrated 1–5 scale) whose autonomous steps — score ≥ γ,
    OS-Kairos Eq. 4 — are right with a Wilson lower bound ≥ ``target``; and the share of
    steps that would ask a person at that γ."""
    scored = [(float(s), bool(r)) for s, r in scored]
    total = len(scored)
    for gamma in sorted({s for s, _ in scored}):
        kept = [r for s, r in scored if s >= gamma]
        bound = wilson_lower(sum(kept), len(kept))
        if bound >= target:
            return GammaSuggestion(round(gamma, 3), target, len(kept), sum(kept) / len(kept),
                                   bound, (total - len(kept)) / total if total else 0.0)
    return GammaSuggestion(None, target, 0, None, None, 1.0)


def calibrated_pairs(calibrator: EvidenceCalibrator, samples: Iterable[Labelled]
                     ) -> list[tuple[float, bool]]:
    """(calibrated P(right), right) per sample."""
    return [(calibrator.probability(s.evidence, s.app or None), s.right) for s in samples]


def scored_pairs(calibrator: EvidenceCalibrator, samples: Iterable[Labelled]
                 ) -> list[tuple[float, bool]]:
    """(calibrated 1–5 score, right) per sample."""
    return [(probability_to_score(p), r) for p, r in calibrated_pairs(calibrator, samples)]
