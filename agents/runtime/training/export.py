"""``export_training`` and the review page's zip download: logged work out as training data.

Formats (docs/review.md, "Training-data export"):

* ``llamafactory`` — ``dataset_info.json`` plus a JSON-lines file of multimodal ShareGPT
  records (``messages``, ``images``) and the screenshots under ``images/``.
* ``jsonl`` — one full record per handoff (or, with ``episodes``, per episode).

Constant memory: rows come from the database in chunks (``iterator``), each line is
written as soon as it is built, and screenshots are copied one at a time in a second pass
over the same rows (a zip cannot take an image while the data file is open, and keeping
the list of images would grow with the export).
"""
from __future__ import annotations

import datetime as dt
import io
import json
import os
import shutil
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import IO, Any, Iterator

from django.core.files.storage import default_storage
from django.db.models import Q, QuerySet

from agents.runtime.models import Step, Task, TicketStatus, TrainingRecord
from agents.runtime.training.labels import label_meaning
from agents.runtime.training.samples import (
    dataset_info, handoff_samples, prompt_text, sharegpt_record, step_sample,
)

FORMATS = ("llamafactory", "jsonl")
CHUNK = 500
IMAGES_DIR = "images"


class ExportError(ValueError):
    pass


@dataclass
class ExportFilter:
    """The command's filters. ``tickets`` narrows further (the review log's filter)."""

    since: dt.date | None = None
    until: dt.date | None = None
    reason: str = ""
    decision: str = ""
    backend: str = ""
    tickets: Q | None = None  # conditions on Ticket, e.g. LogFilter.conditions()

    def records(self) -> QuerySet[TrainingRecord]:
        q = Q()
        if self.since:
            q &= Q(created_at__date__gte=self.since)
        if self.until:
            q &= Q(created_at__date__lte=self.until)
        if self.reason:
            q &= Q(reason=self.reason)
        if self.decision:
            q &= Q(decision=self.decision)
        if self.backend:
            q &= Q(task__backend=self.backend)
        rows = TrainingRecord.objects.filter(q)
        if self.tickets is not None:
            from agents.runtime.models import Ticket

            rows = rows.filter(ticket__in=Ticket.objects.filter(self.tickets).values("id"))
        return rows

    def tasks(self) -> QuerySet[Task]:
        """Episodes with at least one handoff in the filter, or, with no ticket filter,
        every finished task created in the date range on the backend."""
        if self.reason or self.decision or self.tickets is not None:
            return Task.objects.filter(id__in=self.records().values("task_id"))
        q = Q(status__in=("succeeded", "failed", "aborted"))
        if self.since:
            q &= Q(created_at__date__gte=self.since)
        if self.until:
            q &= Q(created_at__date__lte=self.until)
        if self.backend:
            q &= Q(backend=self.backend)
        return Task.objects.filter(q)


@dataclass
class ExportStats:
    records: int = 0  # handoffs or episodes read
    samples: int = 0  # lines written
    images: int = 0  # screenshots copied
    missing_images: int = 0  # referenced screenshots no longer in storage
    files: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"records": self.records, "samples": self.samples, "images": self.images,
                "missing_images": self.missing_images, "files": self.files}


# --- where the files go ----------------------------------------------------------------

class DirectorySink:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._last_dir: Path | None = None

    def open_text(self, name: str) -> IO[str]:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "w", encoding="utf-8")

    def copy_image(self, storage_name: str, name: str) -> None:
        path = self.root / name
        if path.parent != self._last_dir:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._last_dir = path.parent
        try:
            source = default_storage.path(storage_name)
        except NotImplementedError:  # an object store: read it through the storage API
            source = None
        if source is not None:
            if path.exists():
                path.unlink()
            try:
                # Screenshots never change once written: a hard link is a copy that costs
                # no disk and survives a later purge of the original.
                os.link(source, path)
            except OSError:  # another filesystem
                shutil.copyfile(source, path)
            return
        with default_storage.open(storage_name, "rb") as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)


class ZipSink:
    def __init__(self, archive: zipfile.ZipFile) -> None:
        self.archive = archive

    def open_text(self, name: str) -> IO[str]:
        return io.TextIOWrapper(self.archive.open(name, "w", force_zip64=True),
                                encoding="utf-8")

    def copy_image(self, storage_name: str, name: str) -> None:
        # Screenshots are JPEG already: stored, not deflated again.
        info = zipfile.ZipInfo(name, date_time=dt.datetime.now().timetuple()[:6])
        info.compress_type = zipfile.ZIP_STORED
        with default_storage.open(storage_name, "rb") as src, \
                self.archive.open(info, "w", force_zip64=True) as dst:
            shutil.copyfileobj(src, dst)


# --- the export ------------------------------------------------------------------------

def image_name(storage_name: str) -> str:
    return f"{IMAGES_DIR}/{storage_name.lstrip('/')}"


def _screen(width: Any, height: Any, device_w: Any, device_h: Any) -> tuple[int, int]:
    return (int(width or device_w or 1080), int(height or device_h or 2400))


# What each format reads: a sample needs less than a full record.
_SAMPLE_FIELDS = (
    "id", "goal", "screenshot", "ui_nodes", "history", "agent_action", "human_action",
    "decision", "score_label", "task__device_id", "task__device__width",
    "task__device__height", "ticket__step__screen_width", "ticket__step__screen_height",
)
_RECORD_FIELDS = _SAMPLE_FIELDS + (
    "ticket_id", "task_id", "step_index", "instruction", "plan", "agent_confidence",
    "reason", "question", "answer", "operator__username", "operator_seconds",
    "created_at", "task__backend", "task__device__name", "task__verdict_right",
    "task__verdict_note",
)


class _DeviceApps:
    """Installed app names per phone, read once per phone rather than once per row."""

    def __init__(self) -> None:
        self._names: dict[Any, list[str]] = {}

    def __call__(self, device_id: Any) -> list[str]:
        if device_id not in self._names:
            from devices.models import Device

            apps = Device.objects.filter(id=device_id).values_list("apps", flat=True).first()
            self._names[device_id] = [str(a.get("name")) for a in apps or []
                                      if isinstance(a, dict) and a.get("name")]
        return self._names[device_id]


class Exporter:
    """Runs one export into a sink; ``run`` yields after each line so a streamed response
    can send what is written while the export goes on."""

    def __init__(self, fmt: str, filt: ExportFilter, *, episodes: bool = False) -> None:
        if fmt not in FORMATS:
            raise ExportError(f"format must be one of {', '.join(FORMATS)}, not '{fmt}'")
        self.fmt, self.filter, self.episodes = fmt, filt, episodes
        self.stats = ExportStats()
        self._exists: OrderedDict[str, bool] = OrderedDict()  # a small cache, not a list
        self._apps = _DeviceApps()

    @property
    def data_name(self) -> str:
        return f"kairos_{'episodes' if self.episodes else 'handoffs'}.jsonl"

    def run(self, sink: DirectorySink | ZipSink) -> Iterator[None]:
        with sink.open_text(self.data_name) as out:
            rows = self._episode_lines() if self.episodes else self._handoff_lines()
            for line in rows:
                out.write(line + "\n")
                self.stats.samples += 1
                yield
        self.stats.files.append(self.data_name)
        for storage_name in self._screenshots():
            if self._image_exists(storage_name):
                sink.copy_image(storage_name, image_name(storage_name))
                self.stats.images += 1
                yield
        if self.fmt == "llamafactory":
            with sink.open_text("dataset_info.json") as out:
                name = self.data_name.removesuffix(".jsonl")
                out.write(json.dumps(dataset_info(name, self.data_name), indent=2) + "\n")
            self.stats.files.append("dataset_info.json")
        yield

    def _image_exists(self, storage_name: str) -> bool:
        if not storage_name:
            return False
        if storage_name not in self._exists:
            self._exists[storage_name] = default_storage.exists(storage_name)
            if len(self._exists) > 256:
                self._exists.popitem(last=False)
        return self._exists[storage_name]

    # handoffs ---------------------------------------------------------------------

    def _handoff_lines(self) -> Iterator[str]:
        fields = _RECORD_FIELDS if self.fmt == "jsonl" else _SAMPLE_FIELDS
        rows = self.filter.records().order_by("created_at", "id").values(*fields)
        for row in rows.iterator(chunk_size=CHUNK):
            self.stats.records += 1
            has_image = self._image_exists(row["screenshot"])
            if not has_image and row["screenshot"]:
                self.stats.missing_images += 1
            image = image_name(row["screenshot"]) if has_image else ""
            screen = _screen(row["ticket__step__screen_width"], row["ticket__step__screen_height"],
                             row["task__device__width"], row["task__device__height"])
            if self.fmt == "jsonl":
                yield json.dumps(self._handoff_json(row, image), ensure_ascii=False)
                continue
            if not image:
                continue  # a multimodal sample without its screenshot teaches nothing
            prompt = prompt_text(goal=row["goal"], history=row["history"] or [],
                                 ui_nodes=row["ui_nodes"] or [], screen=screen,
                                 apps=self._apps(row["task__device_id"]))
            for sample in handoff_samples(decision=row["decision"],
                                          agent_action=row["agent_action"],
                                          human_action=row["human_action"], prompt=prompt,
                                          screen=screen, image=image,
                                          label=row["score_label"]):
                yield json.dumps(sharegpt_record(sample), ensure_ascii=False)

    @staticmethod
    def _handoff_json(row: dict[str, Any], image: str) -> dict[str, Any]:
        return {
            "ticket": str(row["ticket_id"]), "task": str(row["task_id"]),
            "created_at": row["created_at"].isoformat(), "backend": row["task__backend"],
            "device": row["task__device__name"], "step": row["step_index"],
            "instruction": row["instruction"], "goal": row["goal"],
            "history": row["history"] or [], "plan": row["plan"] or [],
            "ui_elements": row["ui_nodes"] or [], "screenshot": image or None,
            "screen": {"width": row["ticket__step__screen_width"] or row["task__device__width"],
                       "height": row["ticket__step__screen_height"]
                       or row["task__device__height"]},
            "reason": row["reason"], "question": row["question"] or None,
            "agent": {"action": row["agent_action"], "confidence": row["agent_confidence"]},
            "human": {"decision": row["decision"], "action": row["human_action"],
                      "answer": row["answer"] or None, "operator": row["operator__username"],
                      "seconds": row["operator_seconds"]},
            "label": row["score_label"], "label_meaning": label_meaning(row["score_label"]),
            "verdict": _verdict(row["task__verdict_right"], row["task__verdict_note"]),
        }

    # episodes ---------------------------------------------------------------------

    _STEP_FIELDS = (
        "task_id", "index", "screenshot", "screen_width", "screen_height", "ui_nodes",
        "proposed_action", "confidence", "executed_action", "decided_by", "summary",
        "thought", "plan", "status", "task__instruction", "task__answers", "task__backend",
        "task__status", "task__success", "task__device__name", "task__device_id",
        "task__created_at", "task__verdict_right", "task__verdict_note",
    )

    def _episode_lines(self) -> Iterator[str]:
        from agents.runtime.models import Ticket

        tasks = self.filter.tasks().values("id")
        steps = (Step.objects.filter(task_id__in=tasks).order_by("task_id", "index")
                 .values(*self._STEP_FIELDS))
        decisions = (Ticket.objects.filter(task_id__in=tasks, status=TicketStatus.RESOLVED,
                                           step__isnull=False)
                     .order_by("task_id", "step__index").values_list(
                         "task_id", "step__index", "decision", "reason", "human_action",
                         "agent_right"))
        decision_rows = _PeekIterator(decisions.iterator(chunk_size=CHUNK))
        for task_id, group in groupby(steps.iterator(chunk_size=CHUNK),
                                      key=lambda r: r["task_id"]):
            self.stats.records += 1
            episode = list(group)  # one episode at a time: bounded by max_steps
            decided: dict[int, tuple[str, str, Any, Any]] = {}
            for t, index, decision, reason, human, right in decision_rows.take_while(
                    lambda r: r[0] == task_id, skip=lambda r: str(r[0]) < str(task_id)):
                decided[index] = (decision, reason, human, right)
            yield from self._episode(episode, decided)

    def _episode(self, steps: list[dict[str, Any]], decided: dict[int, tuple]) -> Iterator[str]:
        first = steps[0]
        goal = first["task__instruction"]
        if first["task__answers"]:
            goal += " (" + "; ".join(first["task__answers"]) + ")"
        history: list[str] = []
        out_steps = []
        for row in steps:
            has_image = self._image_exists(row["screenshot"])
            if row["screenshot"] and not has_image:
                self.stats.missing_images += 1
            image = image_name(row["screenshot"]) if has_image else ""
            decision = decided.get(row["index"], ("", "", None, None))
            screen = (row["screen_width"] or 1080, row["screen_height"] or 2400)
            if self.fmt == "llamafactory" and image and row["executed_action"]:
                prompt = prompt_text(goal=goal, history=history, ui_nodes=row["ui_nodes"] or [],
                                     screen=screen, apps=self._apps(row["task__device_id"]))
                sample = step_sample(executed_action=row["executed_action"],
                                     decided_by=row["decided_by"], decision=decision[0],
                                     task_succeeded=row["task__success"], prompt=prompt,
                                     screen=screen, image=image, right=decision[3],
                                     learnable=first["task__verdict_right"] is not False)
                if sample is not None:
                    yield json.dumps(sharegpt_record(sample), ensure_ascii=False)
            out_steps.append({
                "index": row["index"], "screenshot": image or None,
                "screen": {"width": screen[0], "height": screen[1]},
                "ui_elements": row["ui_nodes"] or [], "thought": row["thought"],
                "plan": row["plan"] or [], "proposed_action": row["proposed_action"],
                "confidence": row["confidence"], "executed_action": row["executed_action"],
                "decided_by": row["decided_by"], "status": row["status"],
                "ticket": {"decision": decision[0], "reason": decision[1],
                           "human_action": decision[2], "agent_right": decision[3]}
                if decision[0] else None,
            })
            if row["executed_action"] and row["status"] == "done":
                history.append(row["summary"] or str(row["executed_action"]))
        if self.fmt == "jsonl":
            yield json.dumps({
                "task": str(first["task_id"]), "instruction": first["task__instruction"],
                "goal": goal, "backend": first["task__backend"],
                "device": first["task__device__name"], "status": first["task__status"],
                "success": first["task__success"],
                "created_at": first["task__created_at"].isoformat(),
                "verdict": _verdict(first["task__verdict_right"], first["task__verdict_note"]),
                "steps": out_steps,
            }, ensure_ascii=False)

    # screenshots (second pass) -----------------------------------------------------

    def _screenshots(self) -> Iterator[str]:
        if self.episodes:
            rows = (Step.objects.filter(task_id__in=self.filter.tasks().values("id"))
                    .exclude(screenshot="").order_by("task_id", "index")
                    .values_list("screenshot", flat=True))
        else:
            rows = (self.filter.records().exclude(screenshot="").order_by("created_at", "id")
                    .values_list("screenshot", flat=True))
        previous = None
        for name in rows.iterator(chunk_size=CHUNK):
            if name != previous:  # two handoffs on one step share a screenshot
                yield name
            previous = name


def _verdict(right: bool | None, note: str) -> dict[str, Any] | None:
    """The owner's answer to "Did Kairos do what you asked?", or None (not answered)."""
    if right is None:
        return None
    return {"right": right, "note": note or None}


class _PeekIterator:
    """Walks an ordered iterator alongside another one grouped by the same key."""

    def __init__(self, rows: Iterator[Any]) -> None:
        self.rows = rows
        self.head: Any = None
        self.done = False
        self._advance()

    def _advance(self) -> None:
        try:
            self.head = next(self.rows)
        except StopIteration:
            self.head, self.done = None, True

    def take_while(self, belongs, skip) -> Iterator[Any]:
        while not self.done and skip(self.head):
            self._advance()
        while not self.done and belongs(self.head):
            yield self.head
            self._advance()


def export_to_directory(fmt: str, filt: ExportFilter, out: Path, *,
                        episodes: bool = False) -> ExportStats:
    exporter = Exporter(fmt, filt, episodes=episodes)
    for _ in exporter.run(DirectorySink(out)):
        pass
    return exporter.stats


class _ZipStream(io.RawIOBase):
    """A write-only, unseekable buffer: zipfile streams into it, the response drains it."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._position = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        data = bytes(data)
        self._chunks.append(data)
        self._position += len(data)
        return len(data)

    def tell(self) -> int:
        return self._position

    @property
    def pending(self) -> int:
        return sum(len(c) for c in self._chunks)

    def take(self) -> bytes:
        out = b"".join(self._chunks)
        self._chunks.clear()
        return out


def stream_zip(fmt: str, filt: ExportFilter, *, episodes: bool = False,
               min_chunk: int = 64 * 1024) -> Iterator[bytes]:
    """The export as a zip, produced while it is sent (constant memory)."""
    exporter = Exporter(fmt, filt, episodes=episodes)
    buffer = _ZipStream()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for _ in exporter.run(ZipSink(archive)):
            if buffer.pending >= min_chunk:
                yield buffer.take()
    tail = buffer.take()
    if tail:
        yield tail
