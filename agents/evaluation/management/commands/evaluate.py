"""Run a simulated suite at several thresholds with the oracle operator (CONTRACT)."""
from __future__ import annotations

import json
import sys

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agents.evaluation.suites import EpisodeFailed, evaluate_suite, format_table
from agents.brain.plot import gamma_plot_svg, reliability_plot_svg


def parse_thresholds(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CommandError(f"--thresholds must be numbers separated by commas, not '{text}'")
    if not values or any(not 0 <= v <= 5 for v in values):
        raise CommandError("--thresholds must be between 0 and 5")
    return values


class ProgressBar:
    """A one-line progress bar on a terminal; silent when stderr is not a terminal."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.enabled = stream.isatty()

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * done / max(total, 1))
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} episodes")
        if done == total:
            self.stream.write("\n")
        self.stream.flush()


class Command(BaseCommand):
    help = "Evaluate a backend on a simulated suite across thresholds γ."

    def add_arguments(self, parser):
        parser.add_argument("--suite", required=True, help="suite file or bundled suite name")
        parser.add_argument("--backend", default="heuristic")
        parser.add_argument("--thresholds", default="0,1,2,3,4,5")
        parser.add_argument("--operator", choices=("oracle",), default="oracle")
        parser.add_argument("--jobs", type=int, default=1)
        parser.add_argument("--max-steps", type=int, default=30)
        parser.add_argument("--oracle-budget", type=int, default=None,
                            help="states the oracle may search from one state before it calls "
                                 "it a dead end (default: KAIROS_ORACLE_BUDGET, 50000)")
        parser.add_argument("--json", dest="json_out", help="write the JSON result to this file")
        parser.add_argument("--plot", help="write an SVG of TSR and interventions against γ "
                            "(and, when calibrated, OUT.reliability.svg with the ECE)")
        parser.add_argument("--learn", action="store_true",
                            help="run the tasks in file order on one installation that starts "
                            "with no experience and learns from what production records "
                            "(ticket decisions, the end user's verdict); rows gain 'learning' "
                            "and --plot draws the learning curve")
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--calibrated", dest="calibration", action="store_const",
                           const="out", default="default",
                           help="judge each suite with the calibrator fitted without it and "
                           "the apps only it brings (leave-one-app-out: out of sample)")
        which.add_argument("--in-sample", dest="calibration", action="store_const", const="in",
                           help="use the calibrator fitted on every suite, this one included")
        which.add_argument("--uncalibrated", dest="calibration", action="store_const",
                           const="off", help="the backend's own 1–5 claim, no calibrator")

    def handle(self, *args, **opts):
        from devices.sim import SimLoadError

        thresholds = parse_thresholds(opts["thresholds"])
        if opts["jobs"] < 1:
            raise CommandError("--jobs must be at least 1")
        budget = opts["oracle_budget"]
        if budget is None:
            budget = settings.KAIROS_ORACLE_BUDGET
        if budget < 1:
            raise CommandError("--oracle-budget must be at least 1")
        if opts["learn"]:
            return self._learn(opts, thresholds, budget)
        try:
            result = evaluate_suite(opts["suite"], opts["backend"], thresholds,
                                    operator=opts["operator"], jobs=opts["jobs"],
                                    max_steps=opts["max_steps"], progress=ProgressBar(),
                                    oracle_budget=budget, calibration=opts["calibration"],
                                    var_dir=str(settings.VAR_DIR))
        except (SimLoadError, LookupError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        except EpisodeFailed as exc:
            cause = exc.__cause__
            if isinstance(cause, ValueError) and "calibrator" in str(cause):
                raise CommandError(str(cause)) from None  # e.g. a damaged KAIROS_CALIBRATOR
            raise
        self.stdout.write(format_table(result))
        if opts["json_out"]:
            with open(opts["json_out"], "w") as handle:
                json.dump(result, handle, indent=2)
        if opts["plot"]:
            with open(opts["plot"], "w") as handle:
                handle.write(gamma_plot_svg(result))
            if any(row.get("ece") is not None for row in result["results"]):
                path = Path(opts["plot"])
                with open(path.with_suffix(".reliability.svg"), "w") as handle:
                    handle.write(reliability_plot_svg(result))

    def _learn(self, opts, thresholds, budget) -> None:
        from agents.evaluation.learning import evaluate_learning
        from agents.evaluation.learning_plot import learning_plot_svg
        from devices.sim import SimLoadError

        if opts["jobs"] > 1:
            raise CommandError("--learn runs the tasks one after another: use --jobs 1")
        try:
            result = evaluate_learning(opts["suite"], opts["backend"], thresholds,
                                       operator=opts["operator"], max_steps=opts["max_steps"],
                                       oracle_budget=budget, calibration=opts["calibration"],
                                       var_dir=str(settings.VAR_DIR), progress=ProgressBar(),
                                       prior=_prior())
        except (SimLoadError, LookupError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(format_table(result))
        for row in result["results"]:
            self.stdout.write(
                f"learning at γ={row['threshold']}: asked {_pct(row['asked_first'])} of the "
                f"steps of the first 12 tasks, {_pct(row['asked_last'])} of the last 12; "
                f"autonomy precision over the stream {_pct(row['stream_autonomy_precision'])}")
        if opts["json_out"]:
            with open(opts["json_out"], "w") as handle:
                json.dump(result, handle, indent=2)
        if opts["plot"]:
            with open(opts["plot"], "w") as handle:
                handle.write(learning_plot_svg(result))


def _prior():
    """The shipped prior of the memory's confidence, unless KAIROS_EXPERIENCE_PRIOR=0."""
    from agents.brain.calibration.experience import shipped_prior

    return shipped_prior() if settings.KAIROS_EXPERIENCE_PRIOR else None


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"
