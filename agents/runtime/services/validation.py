"""What a request may ask for, checked before anything changes.

The ``check_*`` helpers validate and authorise: an instruction's or a chat message's
text, γ (the threshold) and who may lower it, an end user's room in the queue, the
backend, the suite task, whether the phone is online. They change nothing, and refuse
with the :mod:`access.errors` family. Also ``default_threshold`` (the γ a new task gets)
and ``devices_json`` (the devices as the API lists them).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

from access.errors import Conflict, Forbidden, NotFound, ServiceError, TooMany
from access.roles import is_operator
from agents.runtime.models import ACTIVE_TASK_STATUSES, Task, TaskStatus
from devices.actions import text_problem
from devices.models import Device, DeviceStatus

MAX_INSTRUCTION_LENGTH = 2000
MAX_MESSAGE_LENGTH = 2000


def check_text(text: str, what: str) -> str:
    """Refuse text no database or socket can carry (NUL, lone surrogates)."""
    if problem := text_problem(text):
        raise ServiceError(f"the {what} {problem}")
    return text


def check_instruction(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ServiceError("the instruction is empty")
    text = check_text(text.strip(), "instruction")
    if len(text) > MAX_INSTRUCTION_LENGTH:
        raise ServiceError(
            f"the instruction is {len(text)} characters; at most {MAX_INSTRUCTION_LENGTH}"
        )
    return text


def default_threshold(device: Device | None = None) -> float:
    """γ for a new task: the phone's own, else the admins' default, else the environment's.

    Admins set the first two on /review/calibration/ (or in /admin/);
    ``KAIROS_DEFAULT_THRESHOLD`` stays the initial default of an installation.
    """
    from agents.runtime.models import InstallationSettings

    if device is not None and device.threshold is not None:
        return float(device.threshold)
    stored = InstallationSettings.objects.filter(pk=1).values_list(
        "default_threshold", flat=True).first()
    return float(stored if stored is not None else settings.KAIROS_DEFAULT_THRESHOLD)


def check_threshold(value: Any, device: Device | None = None) -> float:
    if value is None:
        return default_threshold(device)
    try:
        threshold = float(value)
    except (TypeError, ValueError):
        raise ServiceError("threshold must be a number between 0 and 5") from None
    if not 0 <= threshold <= 5 or threshold != threshold:
        raise ServiceError(f"threshold must be between 0 and 5, not {value}")
    return threshold


def check_requested_threshold(user: Any, value: Any, device: Device) -> float | None:
    """γ a person asks for when starting a task from the API or the web form (issue 23.6).

    The phone's γ (else the installation's) is set by admins; end users may raise it for
    their own task but not lower it — a lower γ lets the agent act on steps it is less sure
    of, which only operators and admins may allow. Refused with 403 naming the phone's γ
    rather than silently clamped, so the caller knows what their task runs at. None (not
    given) means the phone's γ.
    """
    if value is None:
        return None
    threshold = check_threshold(value, device)
    floor = default_threshold(device)
    if threshold < floor and not is_operator(user):
        raise Forbidden(
            f"threshold {threshold:g} is below the γ of {floor:g} set for '{device.name}'; "
            f"only operators and admins may lower it (leave it out, or ask for {floor:g} "
            "or more)")
    return threshold


def check_queue_room(user: Any) -> None:
    """At most ``KAIROS_MAX_QUEUED_PER_USER`` of an end user's tasks wait for a phone at
    once (0: no limit), so one person cannot fill every phone's queue (issue 23.7).
    Operators and admins queue batches on purpose (suites, the chaos test) and are not
    limited."""
    limit = settings.KAIROS_MAX_QUEUED_PER_USER
    if limit <= 0 or is_operator(user):
        return
    waiting = Task.objects.filter(owner=user, status=TaskStatus.QUEUED).count()
    if waiting >= limit:
        raise TooMany(
            f"you already have {waiting} tasks waiting for a phone, the most one person may "
            f"have (KAIROS_MAX_QUEUED_PER_USER = {limit}); wait for one to start, or abort one")


def check_backend(name: Any, device: Device) -> str:
    from agents.brain.backends import backend_names

    name = name or settings.KAIROS_DEFAULT_BACKEND
    if not isinstance(name, str) or name not in backend_names():
        raise NotFound(
            f"unknown backend '{str(name)[:32]}': use one of {', '.join(backend_names())}")
    if name == "oracle" and device.kind != "sim":
        raise Conflict("the oracle backend exists for simulated phones only")
    if name == "openai":
        from agents.brain.backends.openai import configuration_problem

        # Refused now rather than accepted and turned into a model_error ticket that no
        # operator can fix (issue 26, item 6).
        problem = configuration_problem()
        if problem:
            raise Conflict(problem)
    return name


def devices_json(devices: Any) -> list[dict[str, Any]]:
    """Devices as the API lists them: ``status`` is ``offline`` as its host reports, else
    ``busy`` while a task runs on it, else ``online``."""
    devices = list(devices)
    busy = set(Task.objects.filter(device__in=devices, status__in=ACTIVE_TASK_STATUSES)
               .exclude(status=TaskStatus.QUEUED).values_list("device_id", flat=True))
    out = []
    for device in devices:
        data = device.to_json()
        if device.status != DeviceStatus.OFFLINE and device.id in busy:
            data["status"] = "busy"
        out.append(data)
    return out


def check_device_online(device: Device) -> None:
    """A phone its device host reports offline (unplugged, its host stopped) takes no task."""
    if device.status == DeviceStatus.OFFLINE:
        raise Conflict(f"device '{device.name}' is offline: plug it in (or start the "
                       "device_host of its machine) and try again")


def check_suite(name: Any, task_id: Any) -> tuple[str, str]:
    """A suite named over the API: a bundled suite, or a file of ``KAIROS_SUITES_DIR``.

    Returns what the device host loads (a bundled name, or the absolute path of the file)
    and the task id. Unlike ``run_task --suite``, which takes any path an admin gives it,
    a caller over the network must not make the server open files of its choosing.
    """
    from devices.sim import SimLoadError, bundled_suite_names, find_suite

    if not name and not task_id:
        return "", ""
    if not isinstance(name, str) or not isinstance(task_id, str) or not name or not task_id:
        raise NotFound("a suite task needs both 'suite' and 'suite_task'")
    check_text(name, "suite")
    check_text(task_id, "suite_task")
    ref: str | None = name if name in bundled_suite_names() else None
    directory = settings.KAIROS_SUITES_DIR
    if ref is None and directory and "/" not in name and "\\" not in name and len(name) <= 100:
        for suffix in (".yaml", ".yml", ".json"):
            candidate = Path(directory).resolve() / f"{name}{suffix}"
            if candidate.is_file() and candidate.parent == Path(directory).resolve():
                ref = str(candidate)
                break
    if ref is None:
        where = f" or a file in {directory}" if directory else ""
        raise NotFound(f"no suite '{name[:64]}': use one of "
                       f"{', '.join(bundled_suite_names())}{where}")
    try:
        find_suite(ref).task(task_id)
    except KeyError as exc:
        raise NotFound(str(exc.args[0])[:300]) from None
    except SimLoadError as exc:
        raise ServiceError(f"suite '{name[:64]}' cannot be loaded: {str(exc)[:300]}") from None
    return ref, task_id


def check_message_text(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ServiceError("the message is empty")
    text = check_text(text.strip(), "message")
    if len(text) > MAX_MESSAGE_LENGTH:
        raise ServiceError(f"the message is {len(text)} characters; at most {MAX_MESSAGE_LENGTH}")
    return text
