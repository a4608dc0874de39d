"""What a device host keeps on disk so a restart loses nothing (issue 11, item 7).

``HostJournal(directory)`` keeps, under that directory:

* ``actions.jsonl`` — an append-only log of every action the phones performed, one JSON
  object a line: time, device, task and step ids (the request's ``origin``), the action
  and its outcome. The chaos test (tests/chaos/) checks from it that every device action
  belongs to exactly one step and ran at most once; an admin can audit a phone with it.
* ``<device>.state.json`` — each simulated phone's state after its last action or reset
  (the suite task it was reset to, its state variables, screen stack, dialog…) and the
  steps it already performed, written atomically (temporary file, then rename) before the
  action's log line. A restarted host restores its phones from these, so a task goes on
  where it stopped instead of on a phone that forgot everything, and logs a last action
  the kill kept out of the log.

Pure Python (no Django): ``device_host --journal DIR`` turns it on; ``serve`` and
``device_host`` use ``KAIROS_VAR_DIR/devices`` by default.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

STATE_VERSION = 1


def _to_json(value: Any) -> Any:
    """SimState is immutable: every container in it is a tuple."""
    if isinstance(value, tuple):
        return [_to_json(v) for v in value]
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_from_json(v) for v in value)
    return value


def encode_sim_state(state: Any) -> dict[str, Any]:
    from dataclasses import fields

    return {f.name: _to_json(getattr(state, f.name)) for f in fields(state)}


def decode_sim_state(data: dict[str, Any]) -> Any:
    from devices.sim.world import SimState

    return SimState(**{key: _from_json(value) for key, value in data.items()})


def _private(path: str, flags: int) -> int:
    """``open``'s opener: a new file readable and writable by its owner only (0600),
    whatever the umask; an existing one made so too."""
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)
    return fd


class HostJournal:
    """The action log and the phones' saved states of one device host."""

    def __init__(self, directory: str | os.PathLike):
        # What people typed is in the clear here: the host's own user only (issue 23.7).
        self.directory = Path(directory)
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        self.log_path = self.directory / "actions.jsonl"
        self._log_lock = threading.Lock()
        self._resets: dict[str, tuple[str, str]] = {}

    # --- the action log -----------------------------------------------------------
    def performed(self, name: str, device: Any, action: Any, origin: dict[str, Any],
                  outcome: dict[str, Any], performed_steps: dict[str, Any]) -> None:
        entry = {"t": round(time.time(), 4), "device": name, "pid": os.getpid(),
                 "task": origin.get("task"), "step": origin.get("step"),
                 "action": action.to_json(), "ok": outcome.get("ok"),
                 "changed": outcome.get("changed")}
        # The state (with this step among those performed) is saved before the log line:
        # a kill between the two leaves a state whose last action the log lacks, and
        # ``restore`` appends it. The other order would leave a logged action that a
        # restored phone never saw, and the step would run again.
        self._save_state(name, device, performed_steps, last=entry)
        self._append(entry)

    def reset(self, name: str, device: Any, suite: str, task: str,
              performed_steps: dict[str, Any]) -> None:
        self._resets[name] = (suite, task)
        self._save_state(name, device, performed_steps)

    def _append(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, separators=(",", ":")) + "\n"
        with self._log_lock, open(self.log_path, "a", encoding="utf-8",
                                  opener=_private) as log:
            log.write(line)  # one write of one line: lines never interleave

    def _logged(self, entry: dict[str, Any]) -> bool:
        """Is ``entry`` among the log's last lines (the last 1 MiB)?"""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - (1 << 20)))
                tail = log.read().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return False
        mark = json.dumps(entry, separators=(",", ":"))
        return mark in tail

    # --- the phones' states -------------------------------------------------------
    def _state_path(self, name: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        return self.directory / f"{safe}.state.json"

    def _save_state(self, name: str, device: Any, performed_steps: dict[str, Any],
                    last: dict[str, Any] | None = None) -> None:
        if getattr(device.info, "kind", "") != "sim":
            return  # a real phone keeps its own state
        snapshot = device.snapshot()
        suite, task = self._resets.get(name, ("", ""))
        data = {"version": STATE_VERSION, "device": name, "suite": suite, "task": task,
                "var_names": list(snapshot.world.var_names),
                "state": encode_sim_state(snapshot.state),
                "performed": dict(list(performed_steps.items())[-1000:]), "last": last}
        path = self._state_path(name)
        temporary = path.with_suffix(f".tmp{os.getpid()}")
        with open(temporary, "w", encoding="utf-8", opener=_private) as out:
            out.write(json.dumps(data))
        os.replace(temporary, path)  # atomic: a kill -9 leaves the old or the new state

    def restore(self, host: Any) -> list[str]:
        """Put every phone of ``host`` back in its saved state; returns the names restored.

        A state that no longer fits (the apps changed, the file is damaged) is skipped
        with a warning: that phone starts fresh, as it did before there was a journal.
        """
        from devices.sim.device import Snapshot

        restored = []
        for name, device in host.devices.items():
            path = self._state_path(name)
            if getattr(device.info, "kind", "") != "sim" or not path.exists():
                continue
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                task = host._suite_task(data["suite"], data["task"]) if data.get("suite") \
                    else None
                device.reset(task)
                if list(device.world.var_names) != data["var_names"]:
                    raise ValueError("the phone's apps changed since the state was saved")
                device.restore(Snapshot(device.world, decode_sim_state(data["state"])))
            except Exception as exc:
                logger.warning("device %s starts fresh: cannot restore %s (%s)", name, path, exc)
                device.reset(None)
                continue
            self._resets[name] = (data.get("suite") or "", data.get("task") or "")
            host._performed[name] = dict(data.get("performed") or {})
            if data.get("last") and not self._logged(data["last"]):
                self._append(data["last"])  # killed between saving the state and logging
            restored.append(name)
        return restored


def read_action_log(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Every entry of an action log; a last line cut by a kill is ignored."""
    entries = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    for line in text.splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return entries
