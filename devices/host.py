"""The device host: the only owner of device connections (DESIGN "Real components").

One host process per machine with phones (as STF's providers). It executes actions,
answers observations and publishes each device's frames once for all viewers. Workers
and the console reach it through a :class:`DeviceClient`:

* embedded default — :class:`LocalDeviceClient` calls the host living in the same process;
* full stack — :class:`RedisDeviceClient` sends requests over Redis lists; the host's
  ``device_host`` command serves them (one thread per device, so a phone is never driven
  by two requests at once) and keeps each device's newest frame in Redis.

Many machines: each runs one ``device_host``. A host serves a device only while it holds
the device's owner key in Redis (``SET NX`` with a short expiry, renewed while it
serves), so two hosts that both see a phone never both drive it; requests for a device go
to its list and only the owner pops them. A host that dies stops renewing: its phones'
keys expire within :data:`OWNER_TTL` seconds, callers are told the phone is offline, and
another host that sees the phone takes it over, dropping requests queued before it did.
Each host also announces itself and what it owns (:func:`announced_hosts`).

A device that does not answer in time raises :class:`DeviceError`, which the agent loop
turns into a ``device_error`` ticket.

The Redis keys and the JSON forms live in :mod:`devices.host_wire`, the Redis server side
(:class:`RedisHostServer`, :func:`announced_hosts`) in :mod:`devices.host_server`; both are
imported here, so callers keep importing them from this module.
"""
from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from typing import Any, Callable

from devices.actions import Action, ActionOutcome, validate_action
from devices.deadline import DeadlinePassed, call_within
from devices.host_server import RedisHostServer, announced_hosts  # noqa: F401 (re-exported)
from devices.host_wire import (  # noqa: F401 (re-exported)
    ALIVE_KEY, FRAME_KEY, HOST_KEY, HOSTS_KEY, OWNER_KEY, OWNER_TTL, REPLY_KEY, REQUEST_KEY,
    _outcome_to_json, _unpack_frame, info_from_json, info_to_json,
    observation_from_json, observation_to_json,
)
from devices.protocol import DeviceInfo, Frame, Observation

logger = logging.getLogger(__name__)


class DeviceError(RuntimeError):
    """A device could not be reached or refused a request."""


# --- the host ------------------------------------------------------------------------

class DeviceHost:
    """Owns devices and answers requests about them. Thread-safe per device."""

    # Fault drills and audit (issue 11): see ``devices/durability.py``. ``journal`` keeps
    # an append-only log of performed actions and each simulated phone's state on disk;
    # ``action_latency`` makes every action take this long, like a real phone's input.
    journal: Any = None
    action_latency: float = 0.0

    def __init__(self, devices: dict[str, Any]):
        self.devices = devices
        self._locks = {name: threading.RLock() for name in devices}
        self._suites: dict[str, Any] = {}
        self._performed: dict[str, dict[str, Any]] = {name: {} for name in devices}

    def attach(self, name: str, device: Any) -> None:
        """A device that appeared (a phone plugged in) joins this host."""
        self._locks.setdefault(name, threading.RLock())
        self._performed.setdefault(name, {})  # kept across a replug: no step runs twice
        self.devices[name] = device

    def detach(self, name: str) -> Any:
        """A device that went away leaves this host; returns it (or None)."""
        return self.devices.pop(name, None)

    def device(self, name: str) -> Any:
        try:
            return self.devices[name]
        except KeyError:
            raise DeviceError(f"device '{name}' is not attached to this device host") from None

    def _suite_task(self, suite: str, task_id: str) -> Any:
        from devices.sim import find_suite

        if suite not in self._suites:
            self._suites[suite] = find_suite(suite)
        return self._suites[suite].task(task_id)

    def _oracle(self, device: Any, suite: str, task_id: str) -> Any:
        from devices.sim import Oracle

        if device.info.kind != "sim":
            raise DeviceError("the oracle exists only for simulated phones")
        from django.conf import settings

        from devices.sim.oracle import DEFAULT_MAX_STATES

        budget = (getattr(settings, "KAIROS_ORACLE_BUDGET", DEFAULT_MAX_STATES)
                  if settings.configured else DEFAULT_MAX_STATES)
        return Oracle(device, self._suite_task(suite, task_id), max_states=budget)

    def handle(self, name: str, op: str, args: dict[str, Any]) -> Any:
        """Serve one request; the result is JSON-ready (except ``observe``/``frame``)."""
        device = self.device(name)
        with self._locks[name]:
            if op == "info":
                return info_to_json(device.info)
            if op == "observe":
                return device.observe()
            if op == "frame":
                return device.latest_frame()
            if op == "perform":
                return self._perform(name, device, args)
            if op == "performed":
                # Served in turn with this phone's other requests, so an earlier perform of
                # the same step has finished (or expired) before this answers.
                origin = args.get("origin") or {}
                return self._performed[name].get(f"{origin.get('task')}:{origin.get('step')}")
            if op == "reset":
                task = self._suite_task(args["suite"], args["task"]) if args.get("suite") else None
                device.reset(task)
                if self.journal is not None:
                    self.journal.reset(name, device, args.get("suite") or "",
                                       args.get("task") or "", self._performed[name])
                return True
            if op == "check":
                return bool(device.check(self._suite_task(args["suite"], args["task"])))
            if op == "oracle_next":
                from devices.sim.oracle import NoPathError

                oracle = self._oracle(device, args["suite"], args["task"])
                try:
                    return [a.to_json() for a in oracle.next_actions(device.snapshot())]
                except NoPathError:
                    return []  # a dead end: no action leads to success from here
            if op == "oracle_judge":
                oracle = self._oracle(device, args["suite"], args["task"])
                action = validate_action(args["action"], (device.info.width, device.info.height))
                return isinstance(action, Action) and bool(oracle.judge(device.snapshot(), action))
            if op == "oracle_answer":
                oracle = self._oracle(device, args["suite"], args["task"])
                return oracle.answer(args.get("question", ""))
        raise DeviceError(f"unknown device host request '{op}'")

    def _perform(self, name: str, device: Any, args: dict[str, Any]) -> dict[str, Any]:
        """One action, at most once per step: a request naming a step (``origin``) that
        this phone already performed gets the first outcome back and nothing runs again
        (a worker retrying after its reply was lost, an approved device-error ticket)."""
        action = validate_action(args["action"], (device.info.width, device.info.height))
        if not isinstance(action, Action):
            return {"ok": False, "changed": False, "error": action.message, "details": {}}
        origin = args.get("origin") or {}
        key = f"{origin.get('task')}:{origin.get('step')}" if origin.get("task") else ""
        if key and key in self._performed[name]:
            first = self._performed[name][key]
            return dict(first, details=dict(first.get("details") or {}, repeated=True))
        if self.action_latency:
            time.sleep(self.action_latency)
        outcome = _outcome_to_json(device.perform(action))
        if key:
            performed = self._performed[name]
            performed[key] = outcome
            while len(performed) > 1000:
                performed.pop(next(iter(performed)))
        if self.journal is not None:
            self.journal.performed(name, device, action, origin, outcome, self._performed[name])
        return outcome


def attach_journal(host: DeviceHost, directory: Any) -> list[str]:
    """Log ``host``'s actions and save its phones' states under ``directory``; restores
    the states saved there by an earlier run and returns the names of those phones."""
    from devices.durability import HostJournal

    host.journal = HostJournal(directory)
    return host.journal.restore(host)


def build_sim_host(names: list[str], apps: Any = None) -> DeviceHost:
    """Simulated phones with the bundled apps, or with ``apps`` (a suite's bundle: the
    bundled apps and the suite's own)."""
    from devices.sim import SimDevice

    return DeviceHost({name: SimDevice(name, apps=apps) for name in names})


# --- clients -------------------------------------------------------------------------

class DeviceClient:
    """How workers and the console talk to devices. Every call may raise DeviceError."""

    def call(self, name: str, op: str, **args: Any) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def info(self, name: str) -> DeviceInfo:
        return info_from_json(self.call(name, "info"))

    def observe(self, name: str) -> Observation:
        return self.call(name, "observe")

    def perform(self, name: str, action: Action, origin: dict[str, Any] | None = None
                ) -> ActionOutcome:
        """``origin`` ({"task", "step"}) names the step the action belongs to: the host
        performs each step's action at most once and logs it with these ids."""
        args: dict[str, Any] = {"action": action.to_json()}
        if origin:
            args["origin"] = origin
        data = self.call(name, "perform", **args)
        return ActionOutcome(ok=data["ok"], changed=data["changed"], error=data.get("error"),
                             details=data.get("details") or {})

    def performed(self, name: str, origin: dict[str, Any]) -> dict[str, Any] | None:
        """The outcome of the step ``origin`` names, if this phone performed it; else None."""
        return self.call(name, "performed", origin=origin)

    def latest_frame(self, name: str) -> Frame | None:
        return self.call(name, "frame")

    def present(self, names: list[str]) -> dict[str, bool]:
        """Which of ``names`` a device host serves right now."""
        raise NotImplementedError  # pragma: no cover - interface

    def reset(self, name: str, suite: str = "", task: str = "") -> None:
        self.call(name, "reset", suite=suite, task=task)

    def check(self, name: str, suite: str, task: str) -> bool:
        return bool(self.call(name, "check", suite=suite, task=task))

    def oracle_next(self, name: str, suite: str, task: str) -> list[Action]:
        return [validate_action(a) for a in self.call(name, "oracle_next", suite=suite, task=task)]

    def oracle_judge(self, name: str, suite: str, task: str, action: Action) -> bool:
        return bool(self.call(name, "oracle_judge", suite=suite, task=task,
                              action=action.to_json()))

    def oracle_answer(self, name: str, suite: str, task: str, question: str) -> str:
        return str(self.call(name, "oracle_answer", suite=suite, task=task, question=question))


class LocalDeviceClient(DeviceClient):
    """The embedded default: the host lives in this process."""

    def __init__(self, host: DeviceHost):
        self.host = host

    def present(self, names: list[str]) -> dict[str, bool]:
        return {name: name in self.host.devices for name in names}

    def call(self, name: str, op: str, **args: Any) -> Any:
        try:
            return self.host.handle(name, op, args)
        except DeviceError:
            raise
        except Exception as exc:
            logger.exception("device %s failed on %s", name, op)
            raise DeviceError(f"device '{name}' failed on {op}: {exc}") from exc


class RedisDeviceClient(DeviceClient):
    """The full stack: requests go to the ``device_host`` process over Redis lists."""

    def __init__(self, redis_url: str, timeout: float = 10.0):
        self.redis_url = redis_url
        self.timeout = timeout
        self.redis = self._connect()

    def _connect(self) -> Any:
        import redis

        return redis.Redis.from_url(self.redis_url, socket_timeout=self.timeout + 5,
                                    socket_connect_timeout=5)

    def call(self, name: str, op: str, **args: Any) -> Any:
        # The whole call, not each socket read, is bounded (issue 11, item 9).
        redis_client = self.redis
        try:
            return call_within(self.timeout + 2, lambda: self._call(name, op, args),
                               name="device-call")
        except DeadlinePassed:
            # Drop the connections the abandoned call holds; the next call opens new ones.
            self.redis = self._connect()
            redis_client.connection_pool.disconnect()
            raise DeviceError(f"device '{name}' did not answer '{op}' within "
                              f"{self.timeout:g} s (Redis stopped answering)") from None

    def _call(self, name: str, op: str, args: dict[str, Any]) -> Any:
        if op == "frame":
            blob = self._redis_call(self.redis.get, FRAME_KEY.format(name=name))
            return _unpack_frame(blob) if blob else None
        if not self._redis_call(self.redis.exists, OWNER_KEY.format(name=name)):
            raise DeviceError(f"device '{name}' is offline: no device host serves it "
                              "(is it plugged in, and is its machine's device_host running?)")
        request_id = uuid.uuid4().hex
        sent = time.time()
        # The deadline travels with the request: the host drops a request its caller has
        # given up on instead of acting on it unseen (issue 11, items 7 and 9).
        request = json.dumps({"id": request_id, "op": op, "args": args, "sent": sent,
                              "deadline": sent + self.timeout})
        reply_key = REPLY_KEY.format(id=request_id)
        self._redis_call(self.redis.rpush, REQUEST_KEY.format(name=name), request)
        reply = self._redis_call(self.redis.blpop, [reply_key], timeout=self.timeout)
        if reply is None:
            raise DeviceError(
                f"device '{name}' did not answer '{op}' within {self.timeout:g} s "
                "(is the device_host process running?)"
            )
        data = json.loads(reply[1])
        if data.get("error"):
            raise DeviceError(data["error"])
        result = data["result"]
        if op == "observe":
            return observation_from_json(result)
        return result

    def present(self, names: list[str]) -> dict[str, bool]:
        if not names:
            return {}
        owners = self._redis_call(self.redis.mget, [OWNER_KEY.format(name=n) for n in names])
        return {name: owner is not None for name, owner in zip(names, owners)}

    def _redis_call(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        import redis

        try:
            return fn(*args, **kwargs)
        except redis.RedisError as exc:
            raise DeviceError(f"cannot reach the device host through Redis: {exc}") from exc


_client: DeviceClient | None = None
_client_lock = threading.Lock()


def get_device_client() -> DeviceClient:
    """The process-wide client: local host in the embedded default, Redis in the full stack."""
    global _client
    with _client_lock:
        if _client is None:
            from django.conf import settings

            if settings.EMBEDDED or getattr(settings, "KAIROS_LOCAL_DEVICE_HOST", False):
                _client = LocalDeviceClient(get_local_host())
            else:
                _client = RedisDeviceClient(settings.REDIS_URL, settings.KAIROS_DEVICE_TIMEOUT)
        return _client


_local_host: DeviceHost | None = None


def get_local_host() -> DeviceHost:
    """The in-process host of the embedded default, with the simulated phones."""
    global _local_host
    if _local_host is None:
        from django.conf import settings

        _local_host = build_sim_host(list(settings.KAIROS_SIM_DEVICES))
    return _local_host


def set_device_client(client: DeviceClient | None) -> DeviceClient | None:
    """Swap the process-wide client (``run_task``, benchmarks, tests); returns the old one."""
    global _client
    with _client_lock:
        previous, _client = _client, client
    return previous
