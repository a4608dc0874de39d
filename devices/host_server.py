"""The device host's Redis side: :class:`RedisHostServer` serves a
:class:`~devices.host.DeviceHost` to :class:`~devices.host.RedisDeviceClient` callers
(owner keys, request lists, frames), and :func:`announced_hosts` lists the live hosts.

Split out of :mod:`devices.host`, which still exports every name here.
"""
from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from typing import Any, Callable, Protocol

from devices.host_wire import (
    ALIVE_KEY, FRAME_KEY, HOST_KEY, HOSTS_KEY, OWNER_KEY, OWNER_TTL, REPLY_KEY, REQUEST_KEY,
    _pack_frame, observation_to_json,
)
from devices.protocol import Frame, Observation


# The server logged as devices.host before it moved here; its records keep that name.
logger = logging.getLogger("devices.host")

# Claim or renew a device's owner key; 1 when this host owns it now.
_CLAIM_LUA = """
local owner = redis.call('GET', KEYS[1])
if owner == false or owner == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', tonumber(ARGV[2]))
  return 1
end
return 0
"""
# Give a device up, only if this host still owns it.
_RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""



class ServedHost(Protocol):
    """What the server needs of the :class:`~devices.host.DeviceHost` it serves (a
    protocol, so this module does not import ``devices.host``, which re-exports it)."""

    devices: dict[str, Any]

    def handle(self, name: str, op: str, args: dict[str, Any]) -> Any: ...

    def detach(self, name: str) -> Any: ...

class RedisHostServer:
    """Serves a :class:`~devices.host.DeviceHost` over Redis: one thread per device it owns."""

    def __init__(self, host: ServedHost, redis_url: str, host_id: str = "",
                 on_ownership: Callable[[str, bool], None] | None = None):
        import os
        import socket

        import redis

        self.host = host
        self.redis_url = redis_url
        self.redis = redis.Redis.from_url(redis_url)
        self.host_id = host_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.on_ownership = on_ownership
        self.stop_event = threading.Event()
        self.threads: list[threading.Thread] = []
        self.owned: set[str] = set()
        self._claim = self.redis.register_script(_CLAIM_LUA)
        self._release = self.redis.register_script(_RELEASE_LUA)
        self._serving: set[str] = set()

    def start(self) -> None:
        for name in list(self.host.devices):
            self.serve_device(name)
        self.announce()
        thread = threading.Thread(target=self._announce_loop, daemon=True,
                                  name="devhost-announce")
        thread.start()
        self.threads.append(thread)

    def serve_device(self, name: str) -> bool:
        """Claim ``name`` now if no other host owns it, and serve it from now on (taking it
        over later if its owner dies). True when this host owns it on return."""
        owned = self._try_claim(name)
        if name not in self._serving:
            self._serving.add(name)
            for target in (self._serve, self._publish_frames):
                thread = threading.Thread(target=target, args=(name,), daemon=True,
                                          name=f"devhost-{target.__name__}-{name}")
                thread.start()
                self.threads.append(thread)
        return owned

    def drop_device(self, name: str) -> None:
        """Stop serving ``name`` (it went away) and free its owner key."""
        self.host.detach(name)
        self._serving.discard(name)
        self._lose(name)
        self.announce()

    def stop(self) -> None:
        self.stop_event.set()
        for name in list(self.owned):
            self._lose(name)
        self.redis.delete(HOST_KEY.format(id=self.host_id))
        self.redis.srem(HOSTS_KEY, self.host_id)

    def announce(self) -> None:
        """Tell every process which devices this host owns (``device_host --list``)."""
        devices = {}
        for name in sorted(self.owned):
            device = self.host.devices.get(name)
            if device is not None:
                devices[name] = device.info.kind
        waiting = sorted(set(self.host.devices) - self.owned)
        record = json.dumps({"host": self.host_id, "devices": devices, "waiting": waiting,
                             "at": time.time()})
        self.redis.set(HOST_KEY.format(id=self.host_id), record, ex=OWNER_TTL * 2)
        self.redis.sadd(HOSTS_KEY, self.host_id)

    def _announce_loop(self) -> None:
        while not self.stop_event.wait(1.0):
            try:
                self.announce()
            except Exception:
                logger.exception("device host: could not announce itself")

    def _try_claim(self, name: str) -> bool:
        owned = bool(self._claim(keys=[OWNER_KEY.format(name=name)],
                                 args=[self.host_id, OWNER_TTL]))
        if owned and name not in self.owned:
            # requests queued before this host owned the phone are stale (their callers
            # gave up, or a dead owner may have run them): never run them twice
            self.redis.delete(REQUEST_KEY.format(name=name))
            self.owned.add(name)
            logger.info("device host %s now owns %s", self.host_id, name)
            if self.on_ownership:
                self.on_ownership(name, True)
        elif not owned and name in self.owned:
            self.owned.discard(name)
            if self.on_ownership:
                self.on_ownership(name, False)
        return owned

    def _lose(self, name: str) -> None:
        if name in self.owned:
            self.owned.discard(name)
            self._release(keys=[OWNER_KEY.format(name=name)], args=[self.host_id])
            if self.on_ownership:
                self.on_ownership(name, False)

    def _serve(self, name: str) -> None:
        import redis

        conn = redis.Redis.from_url(self.redis_url)
        key = REQUEST_KEY.format(name=name)
        while not self.stop_event.is_set() and name in self._serving:
            try:
                if not self._try_claim(name):  # another host drives it: wait for it to die
                    self.stop_event.wait(1.0)
                    continue
            except redis.RedisError:
                logger.exception("device host: Redis unreachable")
                self.stop_event.wait(1.0)
                continue
            conn.set(ALIVE_KEY.format(name=name), "1", ex=OWNER_TTL)
            item = conn.blpop([key], timeout=1)
            if item is None:
                continue
            request = json.loads(item[1])
            if _expired(request):
                logger.warning("device %s: dropped %s, its caller gave up %.1f s ago", name,
                               request.get("op"), time.time() - request["deadline"])
                continue
            reply: dict[str, Any]
            try:
                result = self.host.handle(name, request["op"], request.get("args") or {})
                if isinstance(result, Observation):
                    result = observation_to_json(result)
                elif isinstance(result, Frame):
                    result = None
                reply = {"result": result}
            except Exception as exc:  # the caller gets the reason, the host keeps serving
                logger.exception("device %s: request %s failed", name, request.get("op"))
                reply = {"error": f"device '{name}' failed on {request.get('op')}: {exc}"}
            reply_key = REPLY_KEY.format(id=request["id"])
            conn.rpush(reply_key, json.dumps(reply))
            conn.expire(reply_key, 60)

    def _publish_frames(self, name: str) -> None:
        from devices.streaming import publish_frame

        last = -1
        while not self.stop_event.is_set() and name in self._serving:
            device = self.host.devices.get(name)
            if device is None or name not in self.owned:
                self.stop_event.wait(0.5)
                continue
            try:
                frame = (device.wait_for_frame(last, timeout=1.0) if last >= 0
                         else device.latest_frame())
            except Exception:  # a phone going away mid-frame: the discovery drops it
                logger.warning("device %s: no frame", name, exc_info=True)
                self.stop_event.wait(1.0)
                continue
            if frame is None or not frame.jpeg:
                continue
            last = frame.number
            self.redis.set(FRAME_KEY.format(name=name), _pack_frame(frame), ex=3600)
            publish_frame(name, frame)


def announced_hosts(redis_url: str) -> list[dict[str, Any]]:
    """Every live device host and the devices it owns (dead ones have expired)."""
    import redis

    conn = redis.Redis.from_url(redis_url)
    hosts = []
    for host_id in sorted(conn.smembers(HOSTS_KEY)):
        record = conn.get(HOST_KEY.format(id=host_id.decode()))
        if record is None:
            conn.srem(HOSTS_KEY, host_id)
            continue
        hosts.append(json.loads(record))
    return hosts


def _expired(request: dict[str, Any]) -> bool:
    deadline = request.get("deadline")
    return isinstance(deadline, (int, float)) and time.time() > deadline
