"""Metrics on logged work, per day or week, backend or device (/review/metrics/).

The arithmetic is ``agents.brain.metrics`` — the same functions ``evaluate`` reports with —
fed from the database: tasks become :class:`TaskRecord` s, resolved interventions become
(right, would-have-acted-alone) pairs for :func:`logged_decision_metrics`.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Mapping

from django.db.models import Count, F, Sum
from django.db.models.functions import TruncDay, TruncWeek
from django.utils import timezone

from agents.brain.metrics import Proportion, TaskRecord, logged_decision_metrics, task_metrics
from agents.runtime.models import (
    Decision, Step, Task, Ticket, TicketKind, TicketStatus, TrainingRecord,
)
from frontend.review.log import FilterError, parse_date

GROUPINGS = {"day": "day", "week": "week", "backend": "backend", "device": "device"}
DEFAULT_DAYS = 30


@dataclass
class MetricsRow:
    key: str
    tasks: int
    succeeded: int
    failed: int
    aborted: int
    running: int
    steps: int
    steps_per_task: float
    interventions_per_task: float
    clarifications_per_task: float
    tsr: float | None  # over the tasks a success predicate judged
    judged: int
    operator_seconds_per_task: float | None
    approval_rate: Proportion
    autonomy_precision: Proportion
    intervention_precision: Proportion


@dataclass
class MetricsPage:
    since: dt.date
    until: dt.date
    by: str
    rows: list[MetricsRow]
    total: MetricsRow | None
    errors: list[str] = field(default_factory=list)


def _key(by: str, prefix: str = ""):
    """The grouping expression on Task (``prefix`` reaches Task from another model)."""
    if by == "day":
        return TruncDay(f"{prefix}created_at")
    if by == "week":
        return TruncWeek(f"{prefix}created_at")
    if by == "backend":
        return F(f"{prefix}backend")
    return F(f"{prefix}device__name")


def _label(value: Any, by: str) -> str:
    if value is None:
        return "–"
    if by == "day":
        return timezone.localtime(value).date().isoformat() if isinstance(value, dt.datetime) \
            else str(value)
    if by == "week":
        day = timezone.localtime(value).date() if isinstance(value, dt.datetime) else value
        return f"week of {day.isoformat()}"
    return str(value)


def parse(params: Mapping[str, str]) -> tuple[dt.date, dt.date, str, list[str]]:
    errors: list[str] = []
    today = timezone.localdate()
    since, until = today - dt.timedelta(days=DEFAULT_DAYS - 1), today
    for name in ("since", "until"):
        raw = (params.get(name) or "").strip()
        if raw:
            try:
                value = parse_date(raw)
            except FilterError as exc:
                errors.append(f"{name}: {exc}")
                continue
            if name == "since":
                since = value
            else:
                until = value
    if since > until:
        errors.append("until: is before since")
        since, until = until - dt.timedelta(days=DEFAULT_DAYS - 1), until
    by = params.get("by") or "day"
    if by not in GROUPINGS:
        errors.append(f"by: '{by[:20]}' is not one of {', '.join(GROUPINGS)}")
        by = "day"
    return since, until, by, errors


def metrics_page(params: Mapping[str, str]) -> MetricsPage:
    since, until, by, errors = parse(params)
    start = timezone.make_aware(dt.datetime.combine(since, dt.time.min))
    end = timezone.make_aware(dt.datetime.combine(until + dt.timedelta(days=1), dt.time.min))
    tasks = Task.objects.filter(created_at__gte=start, created_at__lt=end)

    records: dict[Any, list[TaskRecord]] = {}
    statuses: dict[Any, dict[str, int]] = {}
    steps = dict(Step.objects.filter(task__in=tasks).order_by().values_list(_key(by, "task__"))
                 .annotate(n=Count("id")))
    step_counts = dict(tasks.order_by().values_list("id").annotate(n=Count("steps")))
    for key, task_id, success, status, interventions, clarifications in (
            tasks.order_by().values_list(_key(by), "id", "success", "status", "interventions",
                                         "clarifications")):
        records.setdefault(key, []).append(TaskRecord(
            task=str(task_id), success=success, steps=step_counts.get(task_id, 0),
            interventions=interventions, clarifications=clarifications))
        counts = statuses.setdefault(key, {})
        counts[status] = counts.get(status, 0) + 1
    seconds = dict(TrainingRecord.objects.filter(task__in=tasks).order_by()
                   .values_list(_key(by, "task__")).annotate(s=Sum("operator_seconds")))
    decided: dict[Any, list[tuple[bool, bool]]] = {}
    for key, right, confidence, threshold in (
            Ticket.objects.filter(task__in=tasks, kind=TicketKind.INTERVENTION,
                                  status=TicketStatus.RESOLVED,
                                  decision__in=(Decision.APPROVE, Decision.EDIT,
                                                Decision.TAKEOVER))
            .order_by().values_list(_key(by, "task__"), "agent_right", "step_confidence",
                                    "task__threshold")):
        alone = confidence is not None and confidence >= threshold
        decided.setdefault(key, []).append((bool(right), alone))

    def row(key: str, recs: list[TaskRecord], status: dict[str, int], n_steps: int,
            secs: float | None, pairs: list[tuple[bool, bool]]) -> MetricsRow:
        m = task_metrics(recs)
        # TSR needs a success predicate (suite tasks); a task nobody judged is left out
        # here rather than counted as a failure.
        judged = [r for r in recs if r.success is not None]
        d = logged_decision_metrics(pairs)
        n = len(recs)
        finished = ("succeeded", "failed", "aborted")
        return MetricsRow(
            key=key, tasks=n, succeeded=status.get("succeeded", 0),
            failed=status.get("failed", 0), aborted=status.get("aborted", 0),
            running=n - sum(status.get(s, 0) for s in finished), steps=n_steps,
            steps_per_task=m["steps_per_task"], tsr=task_metrics(judged)["tsr"],
            judged=len(judged),
            interventions_per_task=m["interventions_per_task"],
            clarifications_per_task=m["clarifications_per_task"],
            operator_seconds_per_task=(secs or 0.0) / n if n else None,
            approval_rate=d["approval_rate"], autonomy_precision=d["autonomy_precision"],
            intervention_precision=d["intervention_precision"])

    keys = sorted(records, key=lambda k: (k is None, k), reverse=by in ("day", "week"))
    rows = [row(_label(k, by), records[k], statuses[k], steps.get(k, 0), seconds.get(k),
                decided.get(k, [])) for k in keys]
    total = None
    if rows:
        all_status: dict[str, int] = {}
        for s in statuses.values():
            for name, n in s.items():
                all_status[name] = all_status.get(name, 0) + n
        total = row("all", [r for rs in records.values() for r in rs], all_status,
                    sum(steps.values()), sum(v or 0 for v in seconds.values()),
                    [p for ps in decided.values() for p in ps])
    return MetricsPage(since=since, until=until, by=by, rows=rows, total=total, errors=errors)


# --- measured autonomy precision from spot checks (issue 24, item 2) --------------------

@dataclass
class MeasuredRow:
    key: str
    precision: Proportion
    below_target: bool  # even the interval's upper bound is below the target


@dataclass
class MeasuredPrecision:
    """Autonomy precision measured on spot checks: steps that would have acted alone,
    asked at random anyway, so their labels are an unbiased sample of the confident steps
    (approve = right; edit / take over = wrong)."""

    target: float
    overall: Proportion
    warn: bool
    per: dict[str, list[MeasuredRow]]  # backend / phone / app → rows
    over_time: list[dict[str, Any]]
    svg: str
    all_right_needed: int  # right spot checks in a row for a lower bound ≥ target


def _all_right_needed(target: float) -> int:
    from agents.brain.metrics import wilson_interval

    n = 1
    while (wilson_interval(n, n) or (0.0, 0.0))[0] < target and n < 100000:
        n += 1
    return n


def measured_precision(since: dt.date, until: dt.date, by: str,
                       target: float | None = None) -> MeasuredPrecision:
    from agents.runtime.learning import SPOT_CHECK, TARGET_AUTONOMY_PRECISION, labelled_tickets, \
        ticket_right
    from agents.brain.plot import precision_over_time_svg

    target = TARGET_AUTONOMY_PRECISION if target is None else target
    start = timezone.make_aware(dt.datetime.combine(since, dt.time.min))
    end = timezone.make_aware(dt.datetime.combine(until + dt.timedelta(days=1), dt.time.min))
    tickets = (labelled_tickets().filter(reason=SPOT_CHECK, resolved_at__gte=start,
                                         resolved_at__lt=end)
               .select_related("task", "task__device", "step").order_by("resolved_at"))
    groups: dict[str, dict[str, list[bool]]] = {"backend": {}, "phone": {}, "app": {}}
    periods: dict[dt.date, list[bool]] = {}
    labels: list[bool] = []
    weekly = by == "week"
    for ticket in tickets.iterator(chunk_size=2000):
        right = ticket_right(ticket)
        if right is None:
            continue
        labels.append(right)
        groups["backend"].setdefault(ticket.task.backend, []).append(right)
        groups["phone"].setdefault(ticket.task.device.name, []).append(right)
        groups["app"].setdefault(ticket.step.app or "–", []).append(right)
        day = timezone.localtime(ticket.resolved_at).date()
        if weekly:
            day -= dt.timedelta(days=day.weekday())
        periods.setdefault(day, []).append(right)

    def proportion(values: list[bool]) -> Proportion:
        return Proportion(sum(values), len(values))

    def below(p: Proportion) -> bool:
        return p.interval is not None and p.interval[0] < target

    def clearly_below(p: Proportion) -> bool:
        return p.interval is not None and p.interval[1] < target

    per = {name: [MeasuredRow(key, proportion(v), clearly_below(proportion(v)))
                  for key, v in sorted(values.items())]
           for name, values in groups.items()}
    over_time = []
    day, stride = since, dt.timedelta(days=7 if weekly else 1)
    if weekly:
        day -= dt.timedelta(days=day.weekday())
    while day <= until:
        p = proportion(periods.get(day, []))
        low_high = p.interval
        over_time.append({"label": day.isoformat(), "short": f"{day:%b} {day.day}",
                          "value": p.value, "n": p.n,
                          "low": low_high[0] if low_high else None,
                          "high": low_high[1] if low_high else None})
        day += stride
    overall = proportion(labels)
    return MeasuredPrecision(
        target=target, overall=overall, warn=below(overall), per=per, over_time=over_time,
        svg=precision_over_time_svg(over_time, target=target),
        all_right_needed=_all_right_needed(target))
