"""The intervention log: every ticket, filtered, counted, sorted and paged on the server.

A page runs a fixed number of queries whatever the number of rows (a count, the page's
ids, its rows, the take-overs' operator actions): nothing is loaded per row. The counts
per facet come from their own endpoint (one query per facet), fetched by the page.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Mapping

from django.contrib.auth import get_user_model
from django.db.models import Count, F, FloatField, Func, Q, QuerySet
from django.utils import timezone

from agents.runtime.models import (
    DecidedBy, Decision, Step, Task, TaskStatus, Ticket, TicketKind, TicketReason,
)
from agents.runtime.training.labels import label_meaning, score_of
from frontend.review.words import action_words, decision_words, duration_words

PAGE_SIZE = 50
MAX_QUERY_LENGTH = 200
PENDING = "pending"  # the decision filter's value for tickets nobody decided yet
# The owner's verdict on the ticket's task ("Did Kairos do what you asked?", issue 24).
VERDICTS = {"right": Q(verdict_right=True), "wrong": Q(verdict_right=False),
            "none": Q(verdict_right__isnull=True)}

SORTS = {
    "-when": ("-created_at", "-id"), "when": ("created_at", "id"),
    # Tickets without a scored step (a parse error) sort where each database puts NULL.
    "-confidence": ("-step_confidence", "-created_at"),
    "confidence": ("step_confidence", "-created_at"),
    "-wait": (F("wait").desc(nulls_last=True), "-created_at"),
    "wait": (F("wait").asc(nulls_last=True), "-created_at"),
}


class SecondsBetween(Func):
    """``end - start`` in seconds, in SQL on each database (Django's own duration
    arithmetic calls a Python function per row on SQLite: slow on 20,000 tickets)."""

    output_field = FloatField()
    arity = 2

    def as_sqlite(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection,
                           template="((julianday(%(expressions)s)) * 86400.0)",
                           arg_joiner=") - julianday(", **extra)

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, template="EXTRACT(EPOCH FROM (%(expressions)s))",
                           arg_joiner=" - ", **extra)


SORT_LABELS = {"-when": "newest first", "when": "oldest first",
               "-confidence": "most confident first", "confidence": "least confident first",
               "-wait": "longest human time first", "wait": "shortest human time first"}

# facet name → (lookup on Ticket, how a value reads)
FACETS: dict[str, str] = {
    "kind": "kind", "reason": "reason", "decision": "decision", "backend": "task__backend",
    "device": "task__device__name", "operator": "resolved_by__username",
    "status": "task__status",
}


class FilterError(ValueError):
    """A filter value the log cannot use; the message says which and why."""


@dataclass
class LogFilter:
    since: dt.date | None = None
    until: dt.date | None = None
    device: str = ""
    backend: str = ""
    kind: str = ""
    reason: str = ""
    decision: str = ""
    operator: str = ""
    status: str = ""
    verdict: str = ""
    min_conf: float | None = None
    max_conf: float | None = None
    q: str = ""
    sort: str = "-when"
    page: int = 1
    errors: list[str] = field(default_factory=list)

    # --- parsing -------------------------------------------------------------------

    @classmethod
    def from_query(cls, params: Mapping[str, str]) -> "LogFilter":
        """Read the CONTRACT's query parameters; each bad one is named in ``errors`` and
        left out, so the page still shows what the rest of the filter selects."""
        f = cls()

        def read(name: str, parse: Any) -> None:
            raw = (params.get(name) or "").strip()
            if not raw:
                return
            try:
                setattr(f, name, parse(raw))
            except FilterError as exc:
                f.errors.append(f"{name}: {exc}")

        read("since", parse_date)
        read("until", parse_date)
        read("device", _text)
        read("backend", _text)
        read("kind", _choice({c.value for c in TicketKind}))
        read("reason", _choice({c.value for c in TicketReason}))
        read("decision", _choice({c.value for c in Decision} | {PENDING}))
        read("operator", _text)
        read("status", _choice({c.value for c in TaskStatus}))
        read("verdict", _choice(set(VERDICTS)))
        read("min_conf", _confidence)
        read("max_conf", _confidence)
        read("q", _text)
        read("sort", _choice(set(SORTS)))
        read("page", _page)
        if f.since and f.until and f.since > f.until:
            f.errors.append("until: is before since")
            f.until = None
        if f.min_conf is not None and f.max_conf is not None and f.min_conf > f.max_conf:
            f.errors.append("max_conf: is below min_conf")
            f.max_conf = None
        return f

    def as_params(self, **override: Any) -> dict[str, str]:
        """The filter as query parameters (empty ones left out), for links and export."""
        values = {
            "since": self.since.isoformat() if self.since else "",
            "until": self.until.isoformat() if self.until else "",
            "device": self.device, "backend": self.backend, "kind": self.kind,
            "reason": self.reason, "decision": self.decision, "operator": self.operator,
            "status": self.status, "verdict": self.verdict,
            "min_conf": "" if self.min_conf is None else f"{self.min_conf:g}",
            "max_conf": "" if self.max_conf is None else f"{self.max_conf:g}",
            "q": self.q, "sort": "" if self.sort == "-when" else self.sort,
        }
        values.update({k: str(v) for k, v in override.items()})
        return {k: v for k, v in values.items() if v}

    # --- querying ------------------------------------------------------------------

    def conditions(self, *, without: str = "") -> Q:
        """The filter as one Q on Ticket; ``without`` leaves one facet out (its counts).

        Conditions on the task and the operator are ``IN (subquery)`` rather than joins,
        and the confidence is the ticket's own copy of its step's, so the database can walk the tickets' own index (newest first) and
        stop after a page, instead of joining every ticket first.
        """
        q = Q()
        if self.since:
            q &= Q(created_at__gte=_start_of(self.since))
        if self.until:
            q &= Q(created_at__lt=_start_of(self.until + dt.timedelta(days=1)))
        for name in ("kind", "reason"):
            if getattr(self, name) and name != without:
                q &= Q(**{name: getattr(self, name)})
        if self.decision and without != "decision":
            q &= Q(decision="" if self.decision == PENDING else self.decision)
        if self.operator and without != "operator":
            q &= Q(resolved_by_id__in=get_user_model().objects.filter(
                username=self.operator).values("id"))
        task = Q()
        if self.backend and without != "backend":
            task &= Q(backend=self.backend)
        if self.device and without != "device":
            task &= Q(device__name=self.device)
        if self.status and without != "status":
            task &= Q(status=self.status)
        if self.verdict and without != "verdict":
            task &= VERDICTS[self.verdict]
        if self.q:
            task &= Q(instruction__icontains=self.q)
        if task:
            q &= Q(task_id__in=Task.objects.filter(task).values("id"))
        if self.min_conf is not None:
            q &= Q(step_confidence__gte=self.min_conf)
        if self.max_conf is not None:
            q &= Q(step_confidence__lte=self.max_conf)
        return q

    def tickets(self) -> QuerySet[Ticket]:
        return Ticket.objects.filter(self.conditions())


def _text(raw: str) -> str:
    if len(raw) > MAX_QUERY_LENGTH:
        raise FilterError(f"at most {MAX_QUERY_LENGTH} characters")
    return raw


def _choice(allowed: set[str]):
    def parse(raw: str) -> str:
        if raw not in allowed:
            raise FilterError(f"'{raw[:40]}' is not one of {', '.join(sorted(allowed))}")
        return raw
    return parse


def parse_date(raw: str) -> dt.date:
    try:
        return dt.date.fromisoformat(raw)
    except ValueError:
        raise FilterError(f"'{raw[:40]}' is not a date like 2026-11-23") from None


def _confidence(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise FilterError(f"'{raw[:40]}' is not a number") from None
    if not 0 <= value <= 5:
        raise FilterError("a confidence is between 0 and 5")
    return value


def _page(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise FilterError(f"'{raw[:40]}' is not a page number") from None
    if value < 1:
        raise FilterError("pages start at 1")
    return value


def _start_of(day: dt.date) -> dt.datetime:
    return timezone.make_aware(dt.datetime.combine(day, dt.time.min))


# --- the page ------------------------------------------------------------------------

@dataclass
class LogRow:
    ticket: Ticket
    when: dt.datetime
    task_id: Any
    instruction: str
    device: str
    backend: str
    step_index: int | None
    kind: str
    reason: str
    note: str
    agent_action: str
    confidence: float | None
    threshold: float
    decision: str
    human_action: str
    operator_actions: list[str]
    operator: str
    human_seconds: float | None
    human_time: str
    label: int | None
    label_meaning: str
    question: str
    answer: str


@dataclass
class LogPage:
    filter: LogFilter
    rows: list[LogRow]
    total: int
    page: int
    pages: int
    facets: dict[str, list[tuple[str, int]]]


_ROW_FIELDS = (
    "id", "kind", "reason", "status", "note", "question", "answer", "decision", "human_action",
    "agent_right", "task__verdict_right", "task__verdict_note",
    "created_at", "resolved_at", "task_id", "step_id", "resolved_by_id",
    "task__id", "task__instruction", "task__backend", "task__threshold", "task__status",
    "task__device_id", "task__device__name", "task__device__id",
    "step_confidence", "step__id", "step__index", "step__proposed_action",
    "resolved_by__id", "resolved_by__username",
)


def facet_counts(f: LogFilter) -> dict[str, list[tuple[str, int]]]:
    """Per facet, how many tickets each value has under the rest of the filter."""
    out: dict[str, list[tuple[str, int]]] = {}
    for name, lookup in FACETS.items():
        rows = (Ticket.objects.filter(f.conditions(without=name)).order_by()
                .values_list(lookup).annotate(n=Count("id")))
        counted = sorted(((value or "", n) for value, n in rows), key=lambda r: (-r[1], r[0]))
        if name == "decision":
            counted = [(value or PENDING, n) for value, n in counted]
        if name == "operator":
            counted = [(value, n) for value, n in counted if value]
        out[name] = counted
    return out


def log_page(f: LogFilter, *, with_facets: bool = False) -> LogPage:
    """One page of the log: a count, the page's ids in order, then those rows with what
    they show (one query), then the take-overs' operator actions (one query)."""
    tickets = f.tickets()
    total = tickets.count()
    pages = max(1, -(-total // PAGE_SIZE))
    page = min(f.page, pages)
    ordered = tickets.order_by(*SORTS[f.sort])
    if f.sort.endswith("wait"):
        ordered = tickets.annotate(wait=SecondsBetween("resolved_at", "created_at")).order_by(
            *SORTS[f.sort])
    ids = list(ordered.values_list("id", flat=True)[(page - 1) * PAGE_SIZE: page * PAGE_SIZE])
    found = {t.id: t for t in Ticket.objects.filter(id__in=ids).select_related(
        "task", "task__device", "step", "resolved_by").only(*_ROW_FIELDS)}
    chosen = [found[i] for i in ids if i in found]
    taken = _operator_actions([t for t in chosen if t.decision == Decision.TAKEOVER])
    rows = [_row(t, taken.get(t.id, [])) for t in chosen]
    return LogPage(filter=f, rows=rows, total=total, page=page, pages=pages,
                   facets=facet_counts(f) if with_facets else {})


def _operator_actions(takeovers: list[Ticket]) -> dict[Any, list[str]]:
    """What the operator did after each take-over: one query for the whole page.

    An operator's own inputs are steps without a proposal decided by an operator; each
    belongs to the latest take-over of its task resolved before it was made.
    """
    if not takeovers:
        return {}
    by_task: dict[Any, list[Ticket]] = {}
    for ticket in takeovers:
        by_task.setdefault(ticket.task_id, []).append(ticket)
    steps = (Step.objects.filter(task_id__in=list(by_task), decided_by=DecidedBy.OPERATOR,
                                 proposed_action__isnull=True)
             .order_by("task_id", "index").values_list("task_id", "created_at",
                                                       "executed_action"))
    out: dict[Any, list[str]] = {}
    for task_id, created_at, action in steps:
        owners = [t for t in by_task[task_id] if t.resolved_at and t.resolved_at <= created_at]
        if owners:
            owner = max(owners, key=lambda t: t.resolved_at)
            out.setdefault(owner.id, []).append(action_words(action))
    return out


def _row(t: Ticket, operator_actions: list[str]) -> LogRow:
    step = t.step
    seconds = (t.resolved_at - t.created_at).total_seconds() if t.resolved_at else None
    label = score_of(t.agent_right)  # the stored label (issue 24: an identical edit is right)
    if t.decision in (Decision.EDIT, Decision.APPROVE):
        human = action_words(t.human_action)
    elif t.decision == Decision.TAKEOVER:
        human = "; ".join(operator_actions) if operator_actions else "took the phone (no input)"
    elif t.decision == Decision.ANSWER:
        human = f"“{t.answer}”"
    else:
        human = "–"
    return LogRow(
        ticket=t, when=t.created_at, task_id=t.task_id, instruction=t.task.instruction,
        device=t.task.device.name, backend=t.task.backend,
        step_index=step.index if step else None, kind=t.get_kind_display(),
        reason=t.get_reason_display(), note=t.note,
        agent_action=action_words(step.proposed_action, done=False) if step else "–",
        confidence=t.step_confidence, threshold=t.task.threshold,
        decision=decision_words(t.decision, t.status), human_action=human,
        operator_actions=operator_actions,
        operator=t.resolved_by.username if t.resolved_by else "",
        human_seconds=seconds, human_time=duration_words(seconds), label=label,
        label_meaning=label_meaning(label), question=t.question, answer=t.answer,
    )
