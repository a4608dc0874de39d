"""The γ plot: TSR and interventions per task against the threshold (OS-Kairos Fig. 6).

Pure Python, hand-written SVG (no plotting library in the product's dependencies). Two
y axes because the series have different units: TSR on the left in percent, interventions
per task on the right from 0 to a rounded maximum. Raising γ asks more often, so the
plot shows what each extra intervention buys in task success.
"""
from __future__ import annotations

import math
from typing import Any
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 640, 400
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 64, 72, 48, 84
TSR_COLOUR = "#1f77b4"
INTERVENTION_COLOUR = "#d62728"



def _svg_head(heading: str) -> list[str]:
    """The opening of a full-size plot: the document, its title and the heading."""
    return [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f"<title>{escape(heading)}</title>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{WIDTH / 2:.1f}" y="24" text-anchor="middle" font-size="14">'
        f"{escape(heading)}</text>",
    ]


def _percent_grid(py, left: float, right: float, colour: str | None = None) -> list[str]:
    """Grid lines and 0–100 % labels of a left axis; ``py`` maps a share to y."""
    fill = f' fill="{colour}"' if colour else ""
    out = []
    for i in range(6):
        value = i / 5
        y = py(value)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end"{fill}>'
                   f"{round(value * 100)}%</text>")
    return out

def gamma_plot_svg(result: dict[str, Any], *, title: str | None = None) -> str:
    """A standalone SVG document for an :func:`agents.evaluation.suites.evaluate_suite` result.

    Points whose value is ``null`` are left out of their series; thresholds are placed on
    a linear x axis, so uneven sweeps (0, 3, 4, 5) keep their spacing.
    """
    rows = sorted(result.get("results", []), key=lambda row: float(row["threshold"]))
    gammas = [float(row["threshold"]) for row in rows]
    tsr = [(g, row.get("tsr")) for g, row in zip(gammas, rows)]
    interventions = [(g, row.get("interventions_per_task")) for g, row in zip(gammas, rows)]

    x_lo, x_hi = (min(gammas), max(gammas)) if gammas else (0.0, 5.0)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 0.5, x_hi + 0.5
    # Keep the end points off the axes, where their markers would be half hidden.
    pad = (x_hi - x_lo) * 0.05
    x_lo, x_hi = x_lo - pad, x_hi + pad
    top = max([v for _, v in interventions if v is not None] + [0.0])
    i_hi = _nice_ceiling(top)

    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    left, right = MARGIN_LEFT, MARGIN_LEFT + plot_w
    y_top, y_bottom = MARGIN_TOP, MARGIN_TOP + plot_h

    def px(g: float) -> float:
        return left + (g - x_lo) / (x_hi - x_lo) * plot_w

    def py_tsr(value: float) -> float:
        return y_bottom - value * plot_h

    def py_int(value: float) -> float:
        return y_bottom - value / i_hi * plot_h

    heading = title or (
        f"TSR and interventions vs γ — {result.get('suite', '')} ({result.get('backend', '')})"
    )
    out: list[str] = _svg_head(heading)
    # Grid and left axis (TSR, 0–100 %).
    out += _percent_grid(py_tsr, left, right, colour=TSR_COLOUR)
    # Right axis (interventions per task).
    for i in range(6):
        value = i_hi * i / 5
        y = py_int(value)
        out.append(f'<text x="{right + 6}" y="{y + 4:.1f}" text-anchor="start" '
                   f'fill="{INTERVENTION_COLOUR}">{_tick(value)}</text>')
    out += [
        f'<line x1="{left}" y1="{y_top}" x2="{left}" y2="{y_bottom}" stroke="black"/>',
        f'<line x1="{right}" y1="{y_top}" x2="{right}" y2="{y_bottom}" stroke="black"/>',
        f'<line x1="{left}" y1="{y_bottom}" x2="{right}" y2="{y_bottom}" stroke="black"/>',
    ]
    # x ticks at every evaluated γ.
    for g in gammas:
        x = px(g)
        out.append(f'<line x1="{x:.1f}" y1="{y_bottom}" x2="{x:.1f}" y2="{y_bottom + 5}" stroke="black"/>')
        out.append(f'<text x="{x:.1f}" y="{y_bottom + 18}" text-anchor="middle">{_tick(g)}</text>')
    out += [
        f'<text x="{(left + right) / 2:.1f}" y="{y_bottom + 36}" text-anchor="middle">'
        "threshold γ (ask when confidence &lt; γ)</text>",
        f'<text transform="translate(16 {(y_top + y_bottom) / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle" fill="{TSR_COLOUR}">TSR (task success rate)</text>',
        f'<text transform="translate({WIDTH - 14} {(y_top + y_bottom) / 2:.1f}) rotate(90)" '
        f'text-anchor="middle" fill="{INTERVENTION_COLOUR}">interventions per task</text>',
    ]
    out += _series("tsr", "TSR", [(px(g), py_tsr(v)) for g, v in tsr if v is not None],
                   TSR_COLOUR, marker="circle")
    out += _series("interventions", "interventions per task",
                   [(px(g), py_int(v)) for g, v in interventions if v is not None],
                   INTERVENTION_COLOUR, marker="square", dashed=True)
    # Legend below the x-axis label, so it never hides a point.
    legend_y = HEIGHT - 16
    out += [
        '<g id="legend">',
        f'<line x1="{left}" y1="{legend_y - 4}" x2="{left + 24}" y2="{legend_y - 4}" '
        f'stroke="{TSR_COLOUR}" stroke-width="2"/>',
        f'<circle cx="{left + 12}" cy="{legend_y - 4}" r="3.5" fill="{TSR_COLOUR}"/>',
        f'<text x="{left + 30}" y="{legend_y}">TSR (left axis)</text>',
        f'<line x1="{left + 170}" y1="{legend_y - 4}" x2="{left + 194}" y2="{legend_y - 4}" '
        f'stroke="{INTERVENTION_COLOUR}" stroke-width="2" stroke-dasharray="5 3"/>',
        f'<rect x="{left + 178.5}" y="{legend_y - 7.5}" width="7" height="7" '
        f'fill="{INTERVENTION_COLOUR}"/>',
        f'<text x="{left + 200}" y="{legend_y}">interventions per task (right axis)</text>',
        "</g>",
        "</svg>",
    ]
    return "\n".join(out) + "\n"


def _series(ident: str, label: str, points: list[tuple[float, float]], colour: str, *,
            marker: str, dashed: bool = False) -> list[str]:
    out = [f'<g id="series-{ident}" class="series"><title>{escape(label)}</title>']
    if len(points) > 1:
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        dash = ' stroke-dasharray="5 3"' if dashed else ""
        out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" '
                   f'stroke-width="2"{dash}/>')
    for x, y in points:
        if marker == "circle":
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"/>')
        else:
            out.append(f'<rect x="{x - 3.5:.1f}" y="{y - 3.5:.1f}" width="7" height="7" '
                       f'fill="{colour}"/>')
    out.append("</g>")
    return out


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10^k at or above ``value`` (at least 1)."""
    if value <= 1:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value - 1e-12:
            return step * power
    return 10 * power


def _tick(value: float) -> str:
    return f"{value:g}" if abs(value - round(value, 2)) < 1e-9 else f"{value:.2f}"


def reliability_plot_svg(result: dict[str, Any], *, title: str | None = None) -> str:
    """The reliability diagram of a calibrated evaluation: per P(right) bin, the mean
    calibrated probability (x) against the observed share of right steps (y), one series
    per γ, with the diagonal of perfect calibration and each γ's ECE in the legend."""
    rows = [row for row in result.get("results", []) if row.get("reliability")]
    size = 440
    left, top, plot = 64, 48, size - 64 - 24
    bottom = top + plot

    def px(p: float) -> float:
        return left + p * plot

    def py(p: float) -> float:
        return bottom - p * plot

    heading = title or f"Reliability — {result.get('suite', '')} ({result.get('backend', '')})"
    height = size + 24 * max(1, len(rows))
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{height}" '
        f'viewBox="0 0 {size} {height}" font-family="sans-serif" font-size="12">',
        f'<text x="{size / 2:.1f}" y="24" text-anchor="middle" font-size="14">'
        f'{escape(heading)}</text>',
        f'<rect x="{left}" y="{top}" width="{plot}" height="{plot}" fill="none" stroke="#333"/>',
        f'<line x1="{px(0):.1f}" y1="{py(0):.1f}" x2="{px(1):.1f}" y2="{py(1):.1f}" '
        'stroke="#999" stroke-dasharray="4 3"/>',
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<text x="{px(tick):.1f}" y="{bottom + 16}" text-anchor="middle">'
                   f'{tick:g}</text>')
        out.append(f'<text x="{left - 8}" y="{py(tick) + 4:.1f}" text-anchor="end">{tick:g}</text>')
    out.append(f'<text x="{px(0.5):.1f}" y="{bottom + 34}" text-anchor="middle">'
               'calibrated P(right)</text>')
    out.append(f'<text transform="translate(16 {py(0.5):.1f}) rotate(-90)" text-anchor="middle">'
               'observed share right</text>')
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    for i, row in enumerate(rows):
        colour = palette[i % len(palette)]
        points = [(b["predicted"], b["observed"], b["steps"]) for b in row["reliability"]]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y, _ in points)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2" '
                   f'data-series="gamma-{_tick(float(row["threshold"]))}"/>')
        for x, y, n in points:
            radius = 2 + min(6.0, math.sqrt(n) / 2)
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="{radius:.1f}" '
                       f'fill="{colour}" fill-opacity="0.6"><title>{n} steps</title></circle>')
        ece = row.get("ece")
        label = f"γ = {_tick(float(row['threshold']))}: ECE {ece:.3f}" if ece is not None else ""
        if label and row.get("ece_by_chance") is not None:
            label += f" (a perfect confidence: up to {row['ece_by_chance']:.3f} by chance)"
        out.append(f'<text x="{left}" y="{bottom + 56 + 20 * i}" fill="{colour}">'
                   f'{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


SERIES_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def reliability_svg(series: dict[str, list[dict[str, Any]]], *, title: str = "") -> str:
    """A reliability diagram: observed P(right) per confidence score, one series per
    backend, each point with its Wilson interval (``low``/``high``) as an error bar.

    ``series`` maps a name to rows ``{"score", "steps", "accuracy", "low", "high"}``
    (``agents.brain.confidence.reliability_table`` plus the interval). The dashed diagonal is
    what a 1–5 score would mean if it were a probability: 1 → 0, 5 → 1.
    """
    width, height = 640, 400
    left, right, top, bottom = 64, width - 24, 48, height - 84
    plot_w, plot_h = right - left, bottom - top

    def px(score: float) -> float:
        return left + (score - 0.75) / 4.5 * plot_w

    def py(p: float) -> float:
        return bottom - p * plot_h

    heading = title or "Reliability: P(right) per confidence score"
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12" '
        'role="img" class="reliability">',
        f"<title>{escape(heading)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2:.1f}" y="24" text-anchor="middle" font-size="14">'
        f"{escape(heading)}</text>",
    ]
    for i in range(6):
        p = i / 5
        out.append(f'<line x1="{left}" y1="{py(p):.1f}" x2="{right}" y2="{py(p):.1f}" '
                   'stroke="#e5e5e5"/>')
        out.append(f'<text x="{left - 6}" y="{py(p) + 4:.1f}" text-anchor="end">'
                   f"{round(p * 100)}%</text>")
    for score in range(1, 6):
        out.append(f'<text x="{px(score):.1f}" y="{bottom + 18}" text-anchor="middle">'
                   f"{score}</text>")
    out += [
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="black"/>',
        f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="black"/>',
        f'<line x1="{px(1):.1f}" y1="{py(0):.1f}" x2="{px(5):.1f}" y2="{py(1):.1f}" '
        'stroke="#999" stroke-dasharray="4 4"/>',
        f'<text x="{(left + right) / 2:.1f}" y="{bottom + 36}" text-anchor="middle">'
        "confidence score the gate compared with γ</text>",
        f'<text transform="translate(16 {(top + bottom) / 2:.1f}) rotate(-90)" '
        'text-anchor="middle">P(right): share approved by a person</text>',
    ]
    legend_x = left
    for n, (name, rows) in enumerate(sorted(series.items())):
        colour = SERIES_COLOURS[n % len(SERIES_COLOURS)]
        nudge = (n - (len(series) - 1) / 2) * 0.06  # side by side, not on top
        points = [(px(float(r["score"]) + nudge), py(float(r["accuracy"])), r)
                  for r in sorted(rows, key=lambda r: float(r["score"]))]
        out.append(f'<g class="series" data-backend="{escape(name)}">'
                   f"<title>{escape(name)}</title>")
        if len(points) > 1:
            coords = " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in points)
            out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" '
                       'stroke-width="2"/>')
        for x, y, r in points:
            if r.get("low") is not None and r.get("high") is not None:
                out.append(f'<line x1="{x:.1f}" y1="{py(r["low"]):.1f}" x2="{x:.1f}" '
                           f'y2="{py(r["high"]):.1f}" stroke="{colour}" stroke-width="1.5"/>')
            radius = 3 + min(5.0, math.log10(max(1, int(r.get("steps", 1)))) * 2)
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{radius:.1f}" fill="{colour}">'
                       f'<title>{escape(name)}: score {_tick(float(r["score"]))}, '
                       f'{r.get("steps", 0)} steps, {float(r["accuracy"]):.0%} right</title>'
                       "</circle>")
        out.append("</g>")
        out.append(f'<rect x="{legend_x}" y="{height - 22}" width="10" height="10" '
                   f'fill="{colour}"/><text x="{legend_x + 14}" y="{height - 13}">'
                   f"{escape(name)}</text>")
        legend_x += 24 + 8 * len(name)
    if not series:
        out.append(f'<text x="{(left + right) / 2:.1f}" y="{(top + bottom) / 2:.1f}" '
                   'text-anchor="middle" fill="#666">no decided handoffs yet</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def small_reliability_svg(bins: list[dict[str, Any]], *, title: str, size: int = 200) -> str:
    """A small reliability diagram (inline on a page): per probability bin, the mean
    predicted P(right) (x) against the observed share right (y), marker area by steps,
    with the diagonal of perfect calibration. ``bins`` as ``fit.reliability_bins``."""
    pad = 28
    plot = size - 2 * pad

    def px(p: float) -> float:
        return pad + p * plot

    def py(p: float) -> float:
        return size - pad - p * plot

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" '
           f'viewBox="0 0 {size} {size}" font-family="sans-serif" font-size="10" role="img" '
           f'class="reliability-small"><title>{escape(title)}</title>',
           f'<rect x="{pad}" y="{pad}" width="{plot}" height="{plot}" fill="white" '
           'stroke="#333"/>',
           f'<line x1="{px(0):.1f}" y1="{py(0):.1f}" x2="{px(1):.1f}" y2="{py(1):.1f}" '
           'stroke="#999" stroke-dasharray="4 3"/>',
           f'<text x="{size / 2:.1f}" y="{size - 6}" text-anchor="middle">predicted P(right)'
           '</text>',
           f'<text transform="translate(10 {size / 2:.1f}) rotate(-90)" '
           'text-anchor="middle">observed</text>']
    points = [(float(b["predicted"]), float(b["observed"]), int(b["steps"])) for b in bins]
    if len(points) > 1:
        out.append('<polyline points="' + " ".join(f"{px(x):.1f},{py(y):.1f}"
                                                   for x, y, _ in points)
                   + f'" fill="none" stroke="{TSR_COLOUR}" stroke-width="1.5"/>')
    for x, y, n in points:
        out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" '
                   f'r="{2 + min(5.0, math.sqrt(n)):.1f}" fill="{TSR_COLOUR}" '
                   f'fill-opacity="0.7"><title>{n} held-out labels: predicted {x:.2f}, '
                   f'{y:.0%} right</title></circle>')
    if not points:
        out.append(f'<text x="{size / 2:.1f}" y="{size / 2:.1f}" text-anchor="middle" '
                   'fill="#666">no held-out labels</text>')
    out.append("</svg>")
    return "\n".join(out)


def precision_over_time_svg(points: list[dict[str, Any]], *, target: float,
                            title: str = "") -> str:
    """Measured autonomy precision per period: ``points`` are ``{"label", "value", "low",
    "high", "n"}`` in time order (value None: no labels then); the Wilson interval as a
    bar, the target as a dashed line."""
    width, height = 640, 260
    left, right, top, bottom = 56, width - 20, 36, height - 48
    plot_w, plot_h = right - left, bottom - top
    lo = min([0.5] + [p["low"] for p in points if p.get("low") is not None])
    lo = math.floor(lo * 10) / 10

    def py(value: float) -> float:
        return bottom - (value - lo) / (1 - lo) * plot_h

    step = plot_w / max(1, len(points))
    heading = title or "Measured autonomy precision (spot checks), 95 % Wilson interval"
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11" '
           f'role="img" class="precision-over-time"><title>{escape(heading)}</title>',
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2:.1f}" y="20" text-anchor="middle" font-size="13">'
           f'{escape(heading)}</text>']
    for i in range(6):
        value = lo + (1 - lo) * i / 5
        out.append(f'<line x1="{left}" y1="{py(value):.1f}" x2="{right}" y2="{py(value):.1f}" '
                   'stroke="#eee"/>')
        out.append(f'<text x="{left - 6}" y="{py(value) + 4:.1f}" text-anchor="end">'
                   f'{value:.0%}</text>')
    out.append(f'<line x1="{left}" y1="{py(target):.1f}" x2="{right}" y2="{py(target):.1f}" '
               f'stroke="{INTERVENTION_COLOUR}" stroke-dasharray="5 4" class="target"/>')
    out.append(f'<text x="{right}" y="{py(target) - 4:.1f}" text-anchor="end" '
               f'fill="{INTERVENTION_COLOUR}">target {target:g}</text>')
    previous = None
    for i, point in enumerate(points):
        x = left + step * (i + 0.5)
        if i % max(1, -(-len(points) // 6)) == 0:
            out.append(f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="middle">'
                       f'{escape(str(point.get("short", point["label"])))}</text>')
        if point.get("value") is None:
            previous = None
            continue
        y = py(point["value"])
        out.append(f'<line x1="{x:.1f}" y1="{py(point["low"]):.1f}" x2="{x:.1f}" '
                   f'y2="{py(point["high"]):.1f}" stroke="{TSR_COLOUR}" stroke-width="2"/>')
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{TSR_COLOUR}" '
                   f'data-period="{escape(str(point["label"]))}"><title>'
                   f'{escape(str(point["label"]))}: {point["value"]:.0%} right of {point["n"]} '
                   f'(95 % interval {point["low"]:.0%}–{point["high"]:.0%})</title></circle>')
        if previous is not None:
            out.append(f'<line x1="{previous[0]:.1f}" y1="{previous[1]:.1f}" x2="{x:.1f}" '
                       f'y2="{y:.1f}" stroke="{TSR_COLOUR}" stroke-opacity="0.5"/>')
        previous = (x, y)
    if not any(p.get("value") is not None for p in points):
        out.append(f'<text x="{width / 2:.1f}" y="{height / 2:.1f}" text-anchor="middle" '
                   'fill="#666">no spot checks decided in this range</text>')
    out.append("</svg>")
    return "\n".join(out)
