"""Fit a confidence calibration from this installation's labelled steps (docs/models.md).

Evidence calibrator (issue 12), what the gate uses by default:

    calibrate --backend NAME --from PROBE.jsonl [--from …] [--from-logs]
              [--target-ap 0.95] [--out FILE] [--json]

fits evidence → P(right) (``agents.brain.calibration.fit``) on probe records and, with
``--from-logs``, on resolved handoffs (approve = right, edit / take over = wrong, abort
left out); also fits one variant per probed suite without that suite and the apps only it
brings (leave-one-app-out, for ``evaluate --calibrated``); writes the artefact (default
``var/calibrators/<backend>.json``, which the installation then loads) and prints its
version, ECE in and out of sample and the suggested γ.

Re-measuring only what an existing calibrator is worth on apps it never saw:

    calibrate --backend NAME --remap CALIBRATOR.json --from PROBE.jsonl [--from-logs]
              [--out FILE]

keeps the calibrator's fit and sets its unseen-app map (and each leave-one-out
variant's) from the labelled steps on apps that calibrator never saw — probes of new
apps, or this installation's own handoffs on its own apps — without refitting.

Raw-score calibration (the openai backend's ``KAIROS_LLM_CALIBRATION``):

    calibrate [--backend NAME] [--model M] [--estimator E] [--suite NAME ...]
              [--no-history] [--method isotonic|binned] [--target 0.95]
              [--out var/calibration.json] [--min-pairs 20] [--json]

Pairs come from resolved intervention tickets (approve → right, edit/take over → wrong)
and, with ``--suite``, from episodes of ``--backend`` on simulated suites at γ = 0 labelled
by the oracle (``agents.brain.calibration``). The calibration is written as JSON for
``KAIROS_LLM_CALIBRATION``; the reliability table and the suggested γ are printed.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agents.evaluation import history as data
from agents.brain.confidence import autonomy_precision, fit_calibration, reliability_table

WARN_BELOW = 50


class Command(BaseCommand):
    help = ("Fit raw confidence → P(right) from resolved tickets (and, with --suite, oracle-"
            "labelled simulated episodes); write the calibration JSON and suggest γ.")

    def add_arguments(self, parser):
        parser.add_argument("--backend", help="only this backend's steps; with --suite, the "
                            "backend to evaluate")
        parser.add_argument("--model", help="only steps proposed by this model")
        parser.add_argument("--estimator", help="only steps scored by this confidence estimator")
        parser.add_argument("--suite", action="append", default=[], metavar="NAME",
                            help="also run --backend on this simulated suite at γ=0 with the "
                            "oracle labelling every step (repeatable)")
        parser.add_argument("--no-history", action="store_true",
                            help="ignore the tickets in the database (use --suite runs only)")
        parser.add_argument("--max-steps", type=int, default=30, help="per evaluation episode")
        parser.add_argument("--method", choices=("isotonic", "binned"), default="isotonic")
        parser.add_argument("--from", dest="from_files", action="append", default=[],
                            metavar="FILE", help="probe records (JSON lines from manage.py "
                            "probe) to fit the evidence calibrator on (repeatable)")
        parser.add_argument("--from-logs", action="store_true",
                            help="fit the evidence calibrator on resolved handoffs too")
        parser.add_argument("--remap", metavar="CALIBRATOR", help="keep this evidence "
                            "calibrator's fit; measure only its unseen-app map on the --from / "
                            "--from-logs steps on apps it never saw")
        parser.add_argument("--cross-fit", action="store_true",
                            help="fit the isotonic layer on scores from models fitted without "
                            "each suite (more conservative; see agents/brain/calibration/fit.py)")
        parser.add_argument("--target", "--target-ap", type=float, default=0.95,
                            help="autonomy precision γ must reach (default 0.95)")
        parser.add_argument("--out", help="where to write the JSON (default var/calibration.json)")
        parser.add_argument("--min-pairs", type=int, default=20,
                            help="refuse to fit on fewer labelled steps (default 20)")
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.add_argument("--versions", action="store_true",
                            help="list the evidence calibrator's versions (refits from this "
                            "installation's labels), newest first, one per line")

    def handle(self, *args, **opts):
        if opts["versions"]:
            return self.list_versions(opts)
        if not 0 < opts["target"] < 1:
            raise CommandError("--target must be between 0 and 1 (an autonomy precision)")
        if opts["suite"] and not opts["backend"]:
            raise CommandError("--suite needs --backend: the backend whose scores to label")
        if opts["no_history"] and not opts["suite"]:
            raise CommandError("--no-history leaves nothing to fit on without --suite")
        if opts["max_steps"] < 1:
            raise CommandError("--max-steps must be at least 1")
        if opts["remap"] and not (opts["from_files"] or opts["from_logs"]):
            raise CommandError("--remap needs labelled steps: --from PROBE.jsonl or --from-logs")
        if opts["remap"]:
            return self.remap_unseen(opts)
        if opts["from_files"] or opts["from_logs"]:
            return self.fit_evidence(opts)

        pairs: list[data.LabelledPair] = []
        if not opts["no_history"]:
            pairs.extend(data.ticket_pairs(backend=opts["backend"], model=opts["model"],
                                           estimator=opts["estimator"]))
        episodes = 0
        if opts["suite"]:
            from devices.sim import SimLoadError
            from agents.brain.backends import UnknownBackend

            try:
                run = data.evaluation_pairs(opts["suite"], opts["backend"],
                                            max_steps=opts["max_steps"])
            except (SimLoadError, UnknownBackend, KeyError, ValueError) as exc:
                raise CommandError(str(exc)) from None
            episodes = run.episodes
            pairs.extend(p for p in run.pairs
                         if (not opts["model"] or p.group.model == opts["model"])
                         and (not opts["estimator"] or p.group.estimator == opts["estimator"]))

        groups = data.group_counts(pairs)
        if len(groups) > 1:
            listing = "; ".join(f"{g.describe()}: {n} steps" for g, n in
                                sorted(groups.items(), key=lambda item: -item[1]))
            raise CommandError(
                "the labelled steps come from more than one backend/model/estimator, and a "
                f"calibration belongs to one ({listing}); pick one with --backend, --model "
                "or --estimator")
        if len(pairs) < opts["min_pairs"]:
            raise CommandError(
                f"too little data: {len(pairs)} labelled steps with a score (at least "
                f"{opts['min_pairs']} needed, ~{WARN_BELOW}+ advisable). Resolve more intervention "
                "tickets, or add oracle-labelled runs with --suite NAME --backend NAME "
                "(or lower --min-pairs)")
        group = next(iter(groups))
        raw = [(p.score, p.right) for p in pairs]
        calibration = fit_calibration(raw, method=opts["method"],
                                      estimator=group.estimator or group.backend,
                                      target_autonomy_precision=opts["target"])
        sources = {source: sum(1 for p in pairs if p.source == source)
                   for source in (data.SOURCE_TICKETS, data.SOURCE_EVALUATION)}
        calibration.extra = {
            "backend": group.backend, "model": group.model, "estimator": group.estimator,
            "sources": sources, "suites": list(opts["suite"]), "episodes": episodes,
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        out = Path(opts["out"]) if opts["out"] else Path(settings.VAR_DIR) / "calibration.json"
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(calibration.to_json(), indent=2) + "\n")
        except OSError as exc:
            raise CommandError(f"cannot write {out}: {exc}") from None

        table = reliability_table(raw, calibration)
        for row in table:
            row["calibrated"] = round(calibration.confidence(row["score"]), 3)
        calibrated_pairs = [(calibration.confidence(s), r) for s, r in raw]
        precision, acting = (autonomy_precision(calibrated_pairs, calibration.threshold)
                             if calibration.threshold is not None else (None, 0))
        if opts["json"]:
            self.stdout.write(json.dumps({
                "out": str(out), "pairs": len(pairs), "group": calibration.extra,
                "calibration": calibration.to_json(), "reliability": table,
                "threshold": calibration.threshold, "autonomy_precision": precision,
                "acting_alone": acting,
            }))
            return
        if len(pairs) < WARN_BELOW:
            self.stderr.write(f"warning: only {len(pairs)} labelled steps; the fit is rough "
                              f"below ~{WARN_BELOW}")
        self.stdout.write(f"{group.describe()}: {len(pairs)} labelled steps "
                          f"({sources['tickets']} from tickets, {sources['evaluation']} from "
                          f"{episodes} oracle-labelled episodes); method {opts['method']}")
        self.stdout.write(f"{'raw score':>10} {'steps':>6} {'right':>6} {'P(right)':>9} "
                          f"{'calibrated':>11}")
        for row in table:
            self.stdout.write(f"{row['score']:>10g} {row['steps']:>6d} {row['accuracy']:>6.0%} "
                              f"{row['predicted']:>9.3f} {row['calibrated']:>11.3f}")
        if calibration.threshold is None:
            self.stdout.write(
                f"no γ reaches autonomy precision {opts['target']:g} on this history: keep "
                "asking at every step, or lower --target")
        else:
            self.stdout.write(
                f"suggested γ = {calibration.threshold:.3f} (calibrated scale): the {acting} "
                f"steps at or above it were right {precision:.1%} of the time "
                f"(target {opts['target']:g})")
        self.stdout.write(f"wrote {out}; the openai backend uses it with "
                          f"KAIROS_LLM_CALIBRATION={out}")

    def list_versions(self, opts) -> None:
        """``--versions``: every kept version, newest first (agents/runtime/learning.py)."""
        from agents.runtime.models import CalibratorVersion

        versions = CalibratorVersion.objects.order_by("-created_at", "-number")
        if opts["backend"]:
            versions = versions.filter(backend=opts["backend"].strip().lower())
        if opts["json"]:
            self.stdout.write(json.dumps([{
                "backend": v.backend, "number": v.number, "created_at": v.created_at.isoformat(),
                "labels": v.labels, "scores": {k: x for k, x in v.scores.items()
                                               if k != "reliability"},
                "taken": v.taken, "current": v.current, "reason": v.reason,
                "calibrator": v.digest} for v in versions]))
            return
        if not versions.exists():
            self.stdout.write("no calibrator versions yet: the first refit comes after "
                              f"{settings.KAIROS_REFIT_EVERY} labels (KAIROS_REFIT_EVERY)")
            return
        for v in versions:
            brier = v.scores.get("brier_new")
            score = f"held-out Brier {brier:.4f}" if brier is not None else "no held-out score"
            flags = ("taken" if v.taken else "not taken") + (", current" if v.current else "")
            self.stdout.write(
                f"{v.backend} v{v.number}  {v.created_at:%Y-%m-%d %H:%M}  {v.labels} labels  "
                f"{score}  {flags}  [{v.trigger}] {v.reason}")

    # --- the evidence calibrator (issue 12) -------------------------------------------

    def _evidence_samples(self, opts, backend: str) -> list:
        from agents.brain.calibration import fit

        records = []
        for path in opts["from_files"]:
            records.extend(_read_records(path, backend))
        if opts["from_logs"]:
            records.extend(data.ticket_evidence_records(backend=backend))
        return fit.labelled_from_records(records)

    def remap_unseen(self, opts) -> None:
        from agents.brain.calibration import fit
        from agents.brain.calibration.calibrator import EvidenceCalibrator

        try:
            calibrator = EvidenceCalibrator.load(opts["remap"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        backend = (opts["backend"] or calibrator.backend).strip().lower()
        if backend != calibrator.backend:
            raise CommandError(f"{opts['remap']} belongs to backend '{calibrator.backend}', "
                               f"not '{backend}'")
        if calibrator.unseen_app_p is None:
            raise CommandError(f"{opts['remap']} has no unseen-app cap (fitted on fewer than "
                               "two apps): nothing to map; refit it with --from")
        samples = self._evidence_samples(opts, backend)

        def measure(target: EvidenceCalibrator) -> tuple[list, list]:
            pairs = [(target.probability(s.evidence), s.right) for s in samples
                     if target.unseen_app(s.app)]
            return pairs, fit.unseen_map(pairs) if len(pairs) >= opts["min_pairs"] else []

        pairs, knots = measure(calibrator)
        apps = sorted({s.app for s in samples if calibrator.unseen_app(s.app)})
        if not knots:
            raise CommandError(
                f"too little data on apps the calibrator never saw: {len(pairs)} labelled "
                f"steps (at least {opts['min_pairs']} with right and wrong ones); probe suites "
                "of new apps, or resolve more handoffs on your own apps")
        before = fit.expected_calibration_error(pairs)
        calibrator.unseen_app_map = knots
        calibrator.meta["unseen_map"] = {
            "steps": len(pairs), "apps": apps,
            "suites": sorted({s.suite for s in samples if s.suite and s.suite != "logs"}),
            "from_logs": bool(opts["from_logs"]),
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        for name, variant_json in list(calibrator.held_out.items()):
            variant = EvidenceCalibrator.from_json(variant_json, where=f"held_out[{name}]")
            if variant.unseen_app_p is None:
                continue
            variant.unseen_app_map = measure(variant)[1]
            calibrator.held_out[name] = variant.to_json()
        after = fit.expected_calibration_error(
            (calibrator.probability(s.evidence, s.app), s.right) for s in samples
            if calibrator.unseen_app(s.app))
        out = Path(opts["out"] or opts["remap"])
        try:
            calibrator.save(out)
        except OSError as exc:
            raise CommandError(f"cannot write {out}: {exc.strerror}") from None
        summary = {"out": str(out), "version": calibrator.version, "backend": backend,
                   "steps": len(pairs), "apps": apps, "ece_before": before, "ece_after": after}
        if opts["json"]:
            self.stdout.write(json.dumps(summary))
            return
        self.stdout.write(
            f"calibrator {calibrator.version}: unseen-app map from {len(pairs)} steps on "
            f"{len(apps)} app{'' if len(apps) == 1 else 's'} it never saw "
            f"({', '.join(apps)}); ECE there {_pct(before)} → "
            f"{_pct(after)} (in sample: judge it on other apps)")
        self.stdout.write(f"wrote {out}")

    def fit_evidence(self, opts) -> None:
        from agents.brain.calibration import fit

        backend = (opts["backend"] or "").strip().lower()
        if not backend:
            raise CommandError("--backend is needed: a calibrator belongs to one backend")
        samples = self._evidence_samples(opts, backend)
        if len(samples) < opts["min_pairs"]:
            raise CommandError(
                f"too little data: {len(samples)} labelled steps with evidence for backend "
                f"'{backend}' (at least {opts['min_pairs']} needed); run manage.py probe "
                "--backend NAME, or resolve more handoffs")
        suites = sorted({s.suite for s in samples if s.suite and s.suite != "logs"})
        created = datetime.now(timezone.utc).isoformat(timespec="seconds")
        try:
            calibrator = fit.fit_calibrator(samples, backend, min_samples=opts["min_pairs"],
                                            cross_fit=opts["cross_fit"], meta={
                "created_at": created, "suites": suites, "from_logs": bool(opts["from_logs"]),
                "steps": len(samples)})
            calibrator.unseen_app_p, calibrator.unseen_app_map = fit.unseen_app_measure(
                samples, backend, min_samples=opts["min_pairs"], cross_fit=opts["cross_fit"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        out_of_sample: list[tuple[float, bool]] = []
        for suite in suites:
            fitting, judged = fit.held_out_split(samples, suite, _own_apps(suite, samples))
            try:
                variant = fit.fit_calibrator(fitting, backend, min_samples=opts["min_pairs"],
                                             cross_fit=opts["cross_fit"],
                                             meta={"created_at": created, "held_out": suite,
                                                   "steps": len(fitting)})
                variant.unseen_app_p, variant.unseen_app_map = fit.unseen_app_measure(
                    fitting, backend, min_samples=opts["min_pairs"],
                    cross_fit=opts["cross_fit"])
            except ValueError as exc:
                # Too little left without this suite: it has no out-of-sample variant, and
                # evaluate --calibrated judges it with the full calibrator (in sample).
                self.stderr.write(f"no out-of-sample variant without {suite}: {exc}")
                continue
            calibrator.held_out[suite] = variant.to_json()
            out_of_sample.extend(fit.calibrated_pairs(variant, judged))
        in_sample = fit.calibrated_pairs(calibrator, samples)
        ece_in = fit.expected_calibration_error(in_sample)
        ece_out = fit.expected_calibration_error(out_of_sample)
        from agents.brain.calibration.calibrator import probability_to_score

        # γ is suggested from the out-of-sample judgements when there are any: that is
        # how the calibrator will meet apps it was not fitted on.
        basis = out_of_sample or in_sample
        suggestion = fit.suggest_gamma([(probability_to_score(p), r) for p, r in basis],
                                       opts["target"])
        calibrator.meta.update(ece_in_sample=ece_in, ece_out_of_sample=ece_out,
                               suggested_gamma=suggestion.gamma, target_ap=opts["target"])
        out = Path(opts["out"]) if opts["out"] else (
            Path(settings.VAR_DIR) / "calibrators" / f"{backend}.json")
        try:
            calibrator.save(out)
        except OSError as exc:
            raise CommandError(f"cannot write {out}: {exc.strerror}") from None
        summary = {
            "out": str(out), "version": calibrator.version, "backend": backend,
            "steps": len(samples), "suites": suites, "ece_in_sample": ece_in,
            "ece_out_of_sample": ece_out, "target_ap": opts["target"],
            "unseen_app_p": calibrator.unseen_app_p,
            "suggested_gamma": suggestion.gamma, "autonomy_precision": suggestion.precision,
            "wilson_lower": suggestion.lower_bound,
            "interventions_per_step": suggestion.interventions_per_step,
            "reliability_out_of_sample": fit.reliability_bins(out_of_sample),
            "apps_falling_short": {app: calibrator.app_records[app]
                                   for app in sorted(calibrator.app_records)
                                   if calibrator.falls_short(app)},
        }
        if opts["json"]:
            self.stdout.write(json.dumps(summary))
            return
        self.stdout.write(f"calibrator {calibrator.version}: {len(samples)} labelled steps "
                          f"({len(suites)} suites{', handoffs' if opts['from_logs'] else ''})")
        self.stdout.write(f"ECE in sample {_pct(ece_in)}, out of sample (leave-one-app-out) "
                          f"{_pct(ece_out)}")
        if calibrator.unseen_app_p is not None:
            self.stdout.write(f"on an app it was not fitted on, a step is capped at P(right) "
                              f"{calibrator.unseen_app_p:.3f} (measured leaving each app out)")
        for app, (confident, right) in summary["apps_falling_short"].items():
            self.stdout.write(f"{app} stays unfamiliar: its confident steps were right only "
                              f"{right}/{confident} times")
        if suggestion.gamma is None:
            self.stdout.write(f"no γ reaches autonomy precision {opts['target']:g} (Wilson lower "
                              "bound) on this data: keep asking at every step")
        else:
            self.stdout.write(
                f"suggested γ = {suggestion.gamma:g} for autonomy precision {opts['target']:g}: "
                f"{suggestion.acting} steps act alone, right {suggestion.precision:.1%} "
                f"(Wilson lower bound {suggestion.lower_bound:.1%}); expect "
                f"{suggestion.interventions_per_step:.0%} of steps to ask a person")
        self.stdout.write(f"wrote {out}")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _read_records(path: str, backend: str) -> list[dict]:
    records = []
    try:
        handle = open(path)
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CommandError(f"{path} line {number}: not JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise CommandError(f"{path} line {number}: a record is a JSON object")
            if str(record.get("backend", backend)).lower() == backend:
                records.append(record)
    return records


def _own_apps(suite: str, samples) -> set[str]:
    """Packages the suite's steps visit that no bundled app provides: the apps only it
    (and other held-out suites) bring, left out of its leave-one-app-out fit."""
    from devices.sim import bundled_apps

    bundled = {app.package for app in bundled_apps().apps}
    bundled |= {"com.android.launcher3", "com.android.permissioncontroller", "android"}
    return {s.app for s in samples if s.suite == suite and s.app and s.app not in bundled}
