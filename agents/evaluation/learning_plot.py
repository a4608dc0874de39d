"""The chart of ``evaluate --learn`` (issue 25): what a person was asked as an installation
learns, drawn with the brain's SVG helpers (:mod:`agents.brain.plot`)."""
from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape

from agents.brain.plot import (
    HEIGHT, MARGIN_BOTTOM, MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, WIDTH, _percent_grid, _series,
    _svg_head,
)
from agents.evaluation.learning import learning_curve


LEARN_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd")
PRECISION_COLOUR = "#d62728"


def learning_plot_svg(result: dict[str, Any], *, title: str | None = None) -> str:
    """The learning curve of an ``evaluate --learn`` result (issue 25): per γ, the share
    of each task's steps a person was asked about against the tasks seen (a moving mean
    over 4 tasks, so one intent's repetition reads as a trend), and the autonomy precision
    so far (steps that acted alone and were right / steps that acted alone), both 0–100 %.
    """
    rows = [row for row in result.get("results", []) if row.get("learning")]
    n = max((len(row["learning"]) for row in rows), default=1)
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    left, right = MARGIN_LEFT, MARGIN_LEFT + plot_w
    y_top, y_bottom = MARGIN_TOP, MARGIN_TOP + plot_h

    def px(i: float) -> float:
        return left + (i - 0.5) / max(n, 1) * plot_w

    def py(v: float) -> float:
        return y_bottom - v * plot_h

    heading = title or (f"Learning curve — {result.get('suite', '')} "
                        f"({result.get('backend', '')})")
    out: list[str] = _svg_head(heading)
    out += _percent_grid(py, left, right)
    step = max(1, n // 6)
    for i in range(1, n + 1, step):
        out.append(f'<text x="{px(i):.1f}" y="{y_bottom + 16}" text-anchor="middle">{i}</text>')
    out += [
        f'<line x1="{left}" y1="{y_top}" x2="{left}" y2="{y_bottom}" stroke="black"/>',
        f'<line x1="{left}" y1="{y_bottom}" x2="{right}" y2="{y_bottom}" stroke="black"/>',
        f'<text x="{(left + right) / 2:.1f}" y="{y_bottom + 34}" text-anchor="middle">'
        "tasks seen (file order)</text>",
    ]
    legend_y = HEIGHT - 16
    x_legend = left
    for k, row in enumerate(rows):
        colour = LEARN_COLOURS[k % len(LEARN_COLOURS)]
        points = learning_curve(row["learning"])
        shares = [share for _, share, _ in points]
        smooth = [sum(shares[max(0, i - 3):i + 1]) / len(shares[max(0, i - 3):i + 1])
                  for i in range(len(shares))]
        gamma = row.get("threshold")
        out += _series(f"asked-{gamma}", f"share of steps asked, γ={gamma}",
                       [(px(i), py(v)) for (i, _, _), v in zip(points, smooth)], colour,
                       marker="circle")
        precision = [(px(i), py(p)) for i, _, p in points if p is not None]
        out += _series(f"precision-{gamma}", f"autonomy precision so far, γ={gamma}",
                       precision, PRECISION_COLOUR if k == 0 else colour, marker="square",
                       dashed=True)
        out.append(f'<text x="{x_legend}" y="{legend_y}" fill="{colour}">'
                   f"● asked γ={escape(str(gamma))}</text>")
        x_legend += 110
    out.append(f'<text x="{x_legend}" y="{legend_y}" fill="{PRECISION_COLOUR}">'
               "■ - - autonomy precision so far</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
