"""One episode in the foreground, no server needed (CONTRACT ``run_task``)."""
from __future__ import annotations

import json
from collections import deque
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from access.errors import ServiceError
from agents.runtime.models import StepStatus, Task, TaskStatus, TicketStatus
from agents.runtime.services import lifecycle, steps, tickets
from devices.host import DeviceHost, LocalDeviceClient, build_sim_host, set_device_client
from devices.models import Device


class Command(BaseCommand):
    help = ("Run one task to the end in this process: --suite PATH --task ID, or an "
            "instruction with --device sim.")

    def add_arguments(self, parser):
        parser.add_argument("instruction", nargs="?", help="a free-form instruction")
        parser.add_argument("--suite", help="a suite file or the name of a bundled suite")
        parser.add_argument("--task", help="the id of a task in the suite")
        parser.add_argument("--device", default="sim",
                            help="an attached adb phone's serial, or a simulated phone's name "
                                 "(default: sim)")
        parser.add_argument("--threshold", type=float, default=None, help="γ, 0–5")
        parser.add_argument("--backend", default=None, help="heuristic | openai | oracle")
        parser.add_argument("--operator", choices=("oracle", "none"), default="none",
                            help="who resolves tickets: the simulator's oracle, or nobody")
        parser.add_argument("--max-steps", type=int, default=None)
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args, **opts):
        from devices.sim import SimLoadError, find_suite

        instruction, suite_name, task_id = opts["instruction"], opts["suite"], opts["task"]
        if bool(suite_name) != bool(task_id):
            raise CommandError("--suite and --task go together")
        if not suite_name and not instruction:
            raise CommandError("give an instruction, or --suite and --task")
        suite_task = suite = None
        if suite_name:
            try:
                suite = find_suite(suite_name)
                suite_task = suite.task(task_id)
            except (SimLoadError, KeyError, LookupError) as exc:
                raise CommandError(str(exc).strip("'\"")) from None
            instruction = suite_task.instruction
        if opts["operator"] == "oracle" and suite_task is None:
            raise CommandError("--operator oracle needs --suite and --task")

        call_command("migrate", verbosity=0, interactive=False)
        host = self._host(opts["device"], suite)
        previous_client = set_device_client(LocalDeviceClient(host))
        pending: deque[tuple[str, int]] = deque()
        previous_scheduler = lifecycle.set_step_scheduler(
            lambda tid, index: pending.append((tid, index)))
        try:
            task = self._run(opts, instruction, suite_name, task_id, host, pending)
        except ServiceError as exc:
            raise CommandError(exc.detail) from None
        finally:
            lifecycle.set_step_scheduler(previous_scheduler)
            set_device_client(previous_client)
            for device in host.devices.values():
                if hasattr(device, "close"):
                    device.close()
        self._report(task, task_id, opts["json"])

    def _host(self, name: str, suite: Any) -> DeviceHost:
        """A simulated phone with the suite's apps for a suite task; else an adb phone when
        the adb server has one with that serial, else a simulated one."""
        from django.conf import settings

        if suite is not None:
            # The suite's own apps (home, bank, a fresh app …) are not on the demo phones.
            return build_sim_host([name], apps=suite.bundle)
        from devices.adb.driver import AdbDevice, adb_client, attached_phones

        where = f"{settings.KAIROS_ADB_HOST}:{settings.ANDROID_ADB_SERVER_PORT}"
        client = adb_client(settings.KAIROS_ADB_HOST, settings.ANDROID_ADB_SERVER_PORT,
                            settings.KAIROS_DEVICE_TIMEOUT)
        try:
            states = attached_phones(client)
        except Exception:
            states = {}
        if name not in states:
            if name != "sim":
                self.stderr.write(f"no adb phone '{name}' at the adb server {where}; "
                                  f"running on a simulated phone named '{name}'")
            return build_sim_host([name])
        if states[name] != "device":
            raise CommandError(f"adb phone '{name}' is {states[name]} (see docs/phones.md)")
        try:
            phone = AdbDevice(name, client, timeout=settings.KAIROS_DEVICE_TIMEOUT,
                              video=False)
        except Exception as exc:
            raise CommandError(f"cannot use adb phone '{name}': {exc}") from None
        return DeviceHost({name: phone})

    def _run(self, opts, instruction, suite_name, task_id, host, pending):
        user_model = get_user_model()
        owner, _ = user_model.objects.get_or_create(username="run_task")
        phone = host.device(opts["device"])
        device, _ = Device.objects.update_or_create(name=opts["device"], defaults={
            "kind": phone.info.kind, "width": phone.info.width, "height": phone.info.height,
            "status": "online"})
        # One task drives a phone at a time. An earlier run_task episode left waiting on
        # this phone (--operator none) can never go on: its in-process phone is gone.
        for stale in Task.objects.driving(device).filter(owner=owner):
            lifecycle.finish_task(stale, TaskStatus.ABORTED, error="superseded by a new run_task")
        task = lifecycle.create_task(
            owner, device, instruction, threshold=opts["threshold"], backend=opts["backend"],
            suite=suite_name or "", suite_task=task_id or "", max_steps=opts["max_steps"],
        )
        if task.status == TaskStatus.QUEUED:
            driver = device.current_task
            lifecycle.finish_task(task, TaskStatus.ABORTED, error="the phone is busy")
            busy = f"task {driver.id} ({driver.status})" if driver else "another task"
            raise CommandError(f"device '{device.name}' is busy with {busy}; "
                               "try another --device")
        oracle_user, _ = user_model.objects.get_or_create(username="oracle-operator")
        while True:
            while pending:
                steps.run_step(*pending.popleft())
            task.refresh_from_db()
            if task.status not in (TaskStatus.WAITING_OPERATOR, TaskStatus.WAITING_USER):
                break
            ticket = task.tickets.filter(status__in=(TicketStatus.OPEN, TicketStatus.CLAIMED)
                                         ).select_related("step", "task__device").first()
            if opts["operator"] != "oracle" or ticket is None:
                break
            tickets.resolve_with_oracle(ticket, oracle_user)
        return task

    def _report(self, task, task_id, as_json: bool) -> None:
        steps = task.steps.filter(status=StepStatus.DONE).exclude(executed_action=None)
        actions = [dict(step.executed_action, by=step.decided_by,
                        confidence=step.confidence if step.decided_by == "agent" else None)
                   for step in steps.order_by("index")]
        result = {
            "task": task_id or str(task.id), "status": task.status, "success": task.success,
            "steps": len(actions), "interventions": task.interventions,
            "clarifications": task.clarifications, "actions": actions,
            # Counted among the interventions: random checks of steps the gate would have
            # let act alone (KAIROS_SPOT_CHECK; 0 turns them off), not the gate's asks.
            "spot_checks": task.tickets.filter(reason="spot_check").count(),
        }
        if as_json:
            self.stdout.write(json.dumps(result))
            return
        self.stdout.write(f"{task.instruction}\n")
        for n, action in enumerate(actions, start=1):
            conf = action.get("confidence")
            who = action["by"] + (f", confidence {conf:g}" if conf is not None else "")
            fields = {k: v for k, v in action.items() if k not in ("by", "confidence")}
            self.stdout.write(f"  {n:>2}. {fields}  ({who})")
        self.stdout.write(
            f"status: {task.status}  success: {task.success}  steps: {len(actions)}  "
            f"interventions: {task.interventions} (spot checks: {result['spot_checks']})  "
            f"clarifications: {task.clarifications}")
