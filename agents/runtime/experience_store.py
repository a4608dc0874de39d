"""The experience memory in the database (issue 25): the store the services use.

Implements :class:`agents.brain.experience.memory.Store` over
:mod:`agents.runtime.models.experience`, plus what admins need: per-app summaries,
forgetting an app, and export/import as JSON (``kairos-experience/1``) to seed another
installation. The matching itself is pure
(``agents.brain.experience``).
"""
from __future__ import annotations

from typing import Any

from django.db import connection, transaction
from django.db.models import Count, F, Max, Q

from agents.brain.experience.memory import ActionTemplate, Entry, Episode, Signature
from agents.runtime.models.experience import (
    ExperienceEntry, ExperienceEpisode, ExperienceOutcome, ExperienceScreen,
)

FORMAT = "kairos-experience/1"
# Parsed action templates per (app, action key), kept per process: every row of one
# decision shares one, so a lookup reads the action JSON once per decision, not per row.
_TEMPLATES: dict[tuple[str, str], ActionTemplate] = {}
# A screen's latest remembered steps read per lookup (recent experience is what counts;
# it also bounds the cost of a screen people have handled thousands of times).
BUCKET_READ = 500
MAX_IMPORT = 200_000
EPISODES_READ = 200  # the latest confirmed episodes of an app a planner's retrieval reads


def _json(value: Any) -> Any:
    """A JSON column read by raw SQL: decoded by the driver (PostgreSQL) or text (SQLite)."""
    import json

    return json.loads(value) if isinstance(value, (str, bytes)) else value


class DbStore:
    """Entries, outcomes and episodes in the database. ``task``/``user``: who and which
    task new rows come from (the audit of what was learned, from whom, when)."""

    def __init__(self, task: Any = None, user: Any = None) -> None:
        self.task = task
        self.user = user if getattr(user, "is_authenticated", False) else None

    # --- Store -----------------------------------------------------------------------

    def add(self, entry: Entry) -> None:
        ExperienceEntry.objects.create(
            app=entry.app[:128], signature=entry.signature, tokens=list(entry.tokens),
            fields=[list(f) for f in entry.fields], instruction=entry.instruction,
            action=entry.action.to_json(), action_key=entry.action.key()[:255], pre=entry.pre,
            polarity=entry.polarity, source=entry.source, task=self.task, by=self.user)
        ExperienceScreen.objects.get_or_create(
            app=entry.app[:128], signature=entry.signature,
            defaults={"tokens": list(entry.tokens), "fields": [list(f) for f in entry.fields]})

    def candidates(self, app: str, signature: str) -> list[Entry]:
        """The latest ``BUCKET_READ`` entries of this kind of screen, in one query: each
        decision's action JSON comes with its latest row only (rows of one decision share
        one template, parsed once and kept per process)."""
        table = ExperienceEntry._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT instruction, action_key, pre, polarity, source, task_id, id, "
                f"CASE WHEN ROW_NUMBER() OVER (PARTITION BY action_key ORDER BY id DESC) = 1 "
                f"THEN action END FROM {table} WHERE app = %s AND signature = %s "
                f"ORDER BY id DESC LIMIT %s", [app, signature, BUCKET_READ])
            rows = cursor.fetchall()
        if len(_TEMPLATES) > 20_000:
            _TEMPLATES.clear()
        for _, key, _, _, _, _, _, action in rows:
            if action is not None and (app, key) not in _TEMPLATES:
                _TEMPLATES[(app, key)] = ActionTemplate.from_json(_json(action))
        out = []
        for instruction, key, pre, polarity, source, task_id, row_id, _ in reversed(rows):
            template = _TEMPLATES.get((app, key))
            if template is None:
                continue
            out.append(Entry(app=app, signature=signature, tokens=(), fields=(),
                             instruction=instruction, action=template, pre=_json(pre) or {},
                             polarity=-1 if polarity < 0 else 1, source=source,
                             task=str(task_id or f"row{row_id}"), created=0.0))
        return out

    def signatures(self, app: str) -> list[Signature]:
        return [Signature(frozenset(tokens), tuple((str(f[0]), bool(f[1])) for f in fields), key)
                for key, tokens, fields in ExperienceScreen.objects.filter(app=app).values_list(
                    "signature", "tokens", "fields")]

    def outcomes(self, kind: str) -> tuple[int, int]:
        row = ExperienceOutcome.objects.filter(kind=kind).values_list("right", "wrong").first()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def add_outcome(self, kind: str, right: bool) -> None:
        ExperienceOutcome.objects.get_or_create(kind=kind)
        field = "right" if right else "wrong"
        ExperienceOutcome.objects.filter(kind=kind).update(**{field: F(field) + 1})

    def add_episode(self, episode: Episode) -> None:
        ExperienceEpisode.objects.create(app=episode.app[:128], goal=episode.goal,
                                         start=episode.start, actions=list(episode.actions),
                                         task=self.task)

    def episodes(self, app: str | None = None) -> list[Episode]:
        rows = ExperienceEpisode.objects.all()
        if app is not None:
            rows = rows.filter(app=app)
        latest = rows.order_by("-id").values_list("app", "goal", "start", "actions")[:EPISODES_READ]
        return [Episode(a, g, s, tuple(str(x) for x in acts)) for a, g, s, acts in reversed(latest)]

    # --- admin -----------------------------------------------------------------------


def app_summaries() -> list[dict[str, Any]]:
    """Per app: entries, confirmations, corrections, decisions, last learned."""
    rows = (ExperienceEntry.objects.values("app").annotate(
        entries=Count("id"), confirmed=Count("id", filter=Q(polarity=1)),
        contradicted=Count("id", filter=Q(polarity=-1)),
        decisions=Count("action_key", distinct=True), last=Max("created_at"))
        .order_by("app"))
    episodes = dict(ExperienceEpisode.objects.values_list("app").annotate(n=Count("id")))
    return [{**row, "episodes": episodes.get(row["app"], 0)} for row in rows]


def app_decisions(app: str, limit: int = 200) -> list[dict[str, Any]]:
    """What the installation knows about ``app``, one line per remembered decision:
    what it does, times confirmed and corrected, and instructions it was learned from."""
    rows = (ExperienceEntry.objects.filter(app=app).values("action_key").annotate(
        confirmed=Count("id", filter=Q(polarity=1)),
        contradicted=Count("id", filter=Q(polarity=-1)),
        screens=Count("signature", distinct=True), last=Max("created_at"))
        .order_by("-confirmed")[:limit])
    out = []
    for row in rows:
        sample = ExperienceEntry.objects.filter(app=app, action_key=row["action_key"]).order_by(
            "-id").values_list("action", "instruction")[:3]
        from agents.brain.experience.memory import ActionTemplate

        action = ActionTemplate.from_json(sample[0][0]).describe() if sample else row["action_key"]
        out.append({**row, "action": action,
                    "examples": list(dict.fromkeys(instruction for _, instruction in sample))})
    return out


def _drop_cached(app: str) -> None:
    for key in [k for k in _TEMPLATES if k[0] == app]:
        _TEMPLATES.pop(key, None)


LAUNCHERS = ("com.android.launcher3",)


def app_names(app: str) -> set[str]:
    """The names the phones list ``app`` under, lower case: as their device hosts
    registered them (``Device.apps``), and as the phones online say now."""
    from devices.host import get_device_client
    from devices.models import Device

    names = set()
    listed: list[Any] = []
    for name, apps in Device.objects.values_list("name", "apps"):
        listed.extend(apps or [])
        try:
            listed.extend(a.to_json() for a in get_device_client().info(name).apps)
        except Exception:  # an offline phone: what it registered is all there is
            continue
    for info in listed:
        if isinstance(info, dict) and info.get("package") == app and info.get("name"):
            names.add(str(info["name"]).lower())
    return names


def _opening(app: str) -> list[int]:
    """The launcher's remembered steps that open ``app``: OPENAPP by its name, or a tap
    on its icon — learned about the app, so forgotten with it."""
    names = app_names(app)
    if not names:
        return []
    ids = list(ExperienceEntry.objects.filter(
        app__in=LAUNCHERS, action_key__in=[f"OPENAPP|{n}" for n in names]).values_list(
        "id", flat=True))
    for row_id, action in ExperienceEntry.objects.filter(
            app__in=LAUNCHERS, action_key__startswith="CLICK|").values_list("id", "action"):
        label = str(((_json(action) or {}).get("locator") or {}).get("label", "")).lower()
        if label in names:
            ids.append(row_id)
    return ids


def forget_app(app: str) -> int:
    """Delete everything learned about ``app`` — with how to open it from the launcher;
    returns the entries removed."""
    _drop_cached(app)
    for launcher in LAUNCHERS:
        _drop_cached(launcher)
    with transaction.atomic():
        opening = _opening(app) if app not in LAUNCHERS else []
        count, _ = ExperienceEntry.objects.filter(Q(app=app) | Q(id__in=opening)).delete()
        ExperienceScreen.objects.filter(app=app).delete()
        ExperienceEpisode.objects.filter(app=app).delete()
    return int(count)


def export_app(app: str) -> dict[str, Any]:
    entries = [
        {"app": r.app, "signature": r.signature, "tokens": r.tokens, "fields": r.fields,
         "instruction": r.instruction, "action": r.action, "pre": r.pre,
         "polarity": r.polarity, "source": r.source, "created": r.created_at.timestamp()}
        for r in ExperienceEntry.objects.filter(app=app).order_by("id")]
    episodes = [{"app": e.app, "goal": e.goal, "start": e.start, "actions": e.actions}
                for e in ExperienceEpisode.objects.filter(app=app).order_by("id")]
    return {"format": FORMAT, "app": app, "entries": entries, "episodes": episodes}


def _has_nul(value: Any, depth: int = 0) -> bool:
    if depth > 50:
        return True  # nested deeper than any export: refused like a NUL
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k, depth + 1) or _has_nul(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v, depth + 1) for v in value)
    return False


def import_experience(data: Any, user: Any = None) -> tuple[str, int]:
    """Load an export into this installation (entries keep their source; the rows say
    who imported them). Raises ValueError naming the first problem; nothing is written
    then. Returns (app, entries imported)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document")
    if _has_nul(data):
        raise ValueError("a text contains a NUL character")
    app = data.get("app")
    if not isinstance(app, str) or not app.strip() or len(app) > 128:
        raise ValueError("'app' must be a package name")
    raw_entries, raw_episodes = data.get("entries"), data.get("episodes", [])
    if not isinstance(raw_entries, list) or not isinstance(raw_episodes, list):
        raise ValueError("'entries' and 'episodes' must be lists")
    if len(raw_entries) > MAX_IMPORT:
        raise ValueError(f"at most {MAX_IMPORT} entries per import")
    entries = []
    for i, raw in enumerate(raw_entries):
        try:
            entry = Entry.from_json(raw)
            entry.action.key()
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"entries[{i}]: {exc}") from None
        if entry.app != app:
            raise ValueError(f"entries[{i}]: app '{entry.app[:60]}' is not '{app[:60]}'")
        entries.append(entry)
    episodes = []
    for i, raw in enumerate(raw_episodes):
        if not isinstance(raw, dict) or not isinstance(raw.get("goal"), str) or not isinstance(
                raw.get("actions", []), list):
            raise ValueError(f"episodes[{i}]: needs a goal and a list of actions")
        episodes.append(Episode(app, raw["goal"], str(raw.get("start", "")),
                                tuple(str(a) for a in raw.get("actions", []))))
    store = DbStore(user=user)
    _drop_cached(app)
    with transaction.atomic():
        for entry in entries:
            store.add(entry)
        for episode in episodes:
            store.add_episode(episode)
    return app, len(entries)
