"""Text output of the evaluation: :func:`format_table` for a suite result (one row per γ)
or a dataset result (a metric/value listing).

Split out of :mod:`agents.evaluation.suites`, which still exports every name here.
"""
from __future__ import annotations

from typing import Any

from agents.brain.metrics import TOGGLE_METRIC_KEYS
from agents.evaluation.replay import DEFAULT_THRESHOLD


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


# --- text output -----------------------------------------------------------------------

_SUITE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    # key, header, kind ("pct" shows a rate as a percentage, "num" a mean)
    ("tasks", "tasks", "int"),
    ("tsr", "TSR", "pct"),
    ("type_acc", "Type", "pct"),
    ("sr", "SR", "pct"),
    ("hsr", "HSR", "pct"),
    ("intervention_recall", "IntRec", "pct"),
    ("intervention_precision", "IntPrec", "pct"),
    ("autonomy_recall", "AutoRec", "pct"),
    ("autonomy_precision", "AutoPrec", "pct"),
    ("asked_share", "Asked", "pct"),
    ("re", "RE", "pct"),
    ("interventions_per_task", "int/task", "num"),
    ("clarifications_per_task", "clar/task", "num"),
    ("steps_per_task", "steps/task", "num"),
)
_TOGGLE_HEADERS = {
    "o_tmr": "O-TMR", "o_amr": "O-AMR", "p_tmr": "P-TMR", "p_amr": "P-AMR",
    "p_fnr": "P-FNR", "n_amr": "N-AMR", "n_fptr": "N-FPTR", "n_fpr": "N-FPR",
}


def format_table(result: dict[str, Any]) -> str:
    """A plain-text table for stdout: one row per γ for a suite result, or a
    metric/value listing for a dataset result. ``-`` marks an undefined metric."""
    if "results" in result:
        return _suite_table(result)
    return _dataset_table(result)


def _cell(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "pct":
        return f"{100 * value:.1f}%"
    if kind == "num":
        return f"{value:.2f}"
    return str(value)


def _suite_table(result: dict[str, Any]) -> str:
    headers = ["γ"] + [header for _, header, _ in _SUITE_COLUMNS]
    rows = [
        [str(_number(row["threshold"]))] + [_cell(row.get(key), kind) for key, _, kind in _SUITE_COLUMNS]
        for row in result["results"]
    ]
    title = f"suite {result.get('suite')}  backend {result.get('backend')}"
    table = title + "\n" + _grid(headers, rows)
    marked = [(row["threshold"], row["sensitive_asked"], row["sensitive_steps"])
              for row in result["results"] if row.get("sensitive_steps")]
    if marked:
        table += "\nsensitive steps asked: " + ", ".join(
            f"{asked}/{steps} at γ={_number(t)}" for t, asked, steps in marked)
    calibrated = [row for row in result["results"] if row.get("ece") is not None]
    if calibrated:
        table += "\ncalibration (ECE; in brackets what a perfect confidence could show by " \
                 "chance on these steps): " + ", ".join(
                     f"{row['ece']:.3f}"
                     + (f" (≤ {row['ece_by_chance']:.3f})" if row.get("ece_by_chance") is not None
                        else "")
                     + f" at γ={_number(row['threshold'])}" for row in calibrated)
    dead = [(row["threshold"], row["dead_ends"]) for row in result["results"]
            if row.get("dead_ends")]
    if dead:
        table += "\ndead ends (episodes left with no path to success): " + ", ".join(
            f"{n} at γ={_number(t)}" for t, n in dead)
    if result.get("skipped"):
        table += "\nskipped (no success predicate): " + ", ".join(result["skipped"])
    return table


def _dataset_table(result: dict[str, Any]) -> str:
    lines = [
        f"dataset {result.get('format')} {result.get('path')}  backend {result.get('backend')}",
        f"{result.get('episodes')} episodes, {result.get('steps')} steps, "
        f"gate at γ={_number(result.get('threshold', DEFAULT_THRESHOLD))}",
    ]
    if result.get("unsupported"):
        lines.append("NOT SCORED: " + result["unsupported"])
    for problem in result.get("unreadable") or []:
        lines.append(f"UNREADABLE record {problem['record']}: {problem['reason']}")
    if result.get("unreadable_records"):
        lines.append(f"{result['unreadable_records']} record(s) could not be read and were "
                     "not scored")
    rows = [
        [header, _cell(result.get(key), "pct")]
        for key, header in (("type_acc", "Type"), ("sr", "SR"), ("tsr", "TSR"), ("hsr", "HSR"),
                            ("intervention_recall", "IntRec"),
                            ("intervention_precision", "IntPrec"),
                            ("autonomy_recall", "AutoRec"),
                            ("autonomy_precision", "AutoPrec"),
                            ("asked_share", "Asked"))
    ]
    toggle = result.get("toggle")
    if toggle:
        rows += [[_TOGGLE_HEADERS[key], _cell(toggle.get(key), "pct")] for key in TOGGLE_METRIC_KEYS]
    return "\n".join(lines) + "\n" + _grid(["metric", "value"], rows)


def _grid(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(headers[i]), *(len(row[i]) for row in rows)) if rows else len(headers[i])
              for i in range(len(headers))]
    def line(cells: list[str]) -> str:
        return "  ".join(cell.rjust(width) for cell, width in zip(cells, widths)).rstrip()
    out = [line(headers), line(["-" * width for width in widths])]
    out.extend(line(row) for row in rows)
    return "\n".join(out)
