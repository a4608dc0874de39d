"""``bench tickets`` and ``bench stream``: the operator console's realtime paths.

Both run a real uvicorn server on a loopback port with this installation's ASGI routes
and channel layer (in-memory, or Redis when ``REDIS_URL`` is set), a private simulated
phone ``bench-sim`` on an in-process device host, and real WebSocket clients — what a
browser does, minus the browser.

* ``bench_tickets`` — a backend that always answers with confidence 1 opens a ticket at
  every step; an operator socket times ticket created → ``ticket.opened`` received, then
  approves over HTTP (Bearer token) and times the approval → the action returning from
  the phone. Steps go through the broker to a real Celery worker running in this process
  (a queue of its own, so no other worker on the same Redis takes them): the hand-off is
  part of what an operator waits for.
* ``bench_stream`` — a driver types a new text into a field 30 times a second, so every
  frame differs; N viewers watch ``/ws/devices/<id>/screen/``. Frames are encoded once
  and fanned out; the server's CPU (the process minus the viewers' own thread) shows
  what each extra viewer costs.
"""
from __future__ import annotations

import asyncio
import json
import socket
import statistics
import threading
import time
import urllib.request
from datetime import datetime
from typing import Any, Callable

from agents.evaluation.bench.loop import AlternatingBackend, percentile
from devices.focus import NoTextField, focus_text_field

BENCH_DEVICE = "bench-sim"
BENCH_OPERATOR = "bench-operator"
DRIVE_HZ = 30.0


class LowConfidenceBackend(AlternatingBackend):
    """Always below γ: every step is a ticket."""

    name = "bench-ticket"
    # Never finishes: every step is a person's decision, which the no-progress guard
    # starts counting afresh from, so the alternation can go on for every sample.
    ROUNDS = None

    def propose(self, ctx: Any) -> Any:
        proposal = super().propose(ctx)
        proposal.confidence = 1.0
        return proposal


# --- shared set-up -------------------------------------------------------------------

class _Rig:
    """The bench's phone, operator, server and cleanup."""

    def __init__(self, phone: Any = None) -> None:
        from django.contrib.auth.models import Group, User
        from django.test import Client

        from devices.host import DeviceHost, LocalDeviceClient, build_sim_host, set_device_client
        from devices.models import Device
        from frontend.models import ApiToken

        self.host = (DeviceHost({BENCH_DEVICE: phone}) if phone is not None
                     else build_sim_host([BENCH_DEVICE]))
        self.phone = self.host.device(BENCH_DEVICE)
        set_device_client(LocalDeviceClient(self.host))
        self.device, _ = Device.objects.update_or_create(
            name=BENCH_DEVICE, defaults={"kind": self.phone.info.kind,
                                         "width": self.phone.info.width,
                                         "height": self.phone.info.height})
        self.user, _ = User.objects.get_or_create(username=BENCH_OPERATOR)
        self.user.groups.add(Group.objects.get_or_create(name="operators")[0])
        client = Client()
        client.force_login(self.user)
        self.session = client.cookies["sessionid"].value
        self.token = ApiToken.issue(self.user)[1]
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.server: Any = None

    def ws(self, path: str) -> Any:
        from websockets.asyncio.client import connect

        return connect(f"ws://127.0.0.1:{self.port}{path}", max_size=1 << 22,
                       additional_headers={"Cookie": f"sessionid={self.session}",
                                           "Origin": f"http://127.0.0.1:{self.port}"})

    async def start_server(self) -> None:
        import uvicorn
        from channels.auth import AuthMiddlewareStack
        from channels.routing import ProtocolTypeRouter, URLRouter

        from devices.streaming import set_server_loop
        from kairos_web.asgi import django_asgi_app, websocket_urlpatterns

        set_server_loop(asyncio.get_running_loop())
        app = ProtocolTypeRouter({"http": django_asgi_app,
                                  "websocket": AuthMiddlewareStack(URLRouter(websocket_urlpatterns))})
        config = uvicorn.Config(app, lifespan="off", log_level="warning", ws_max_size=1 << 22)
        self.server = uvicorn.Server(config)
        self.server_task = asyncio.get_running_loop().create_task(
            self.server.serve(sockets=[self.sock]))
        while not self.server.started:
            await asyncio.sleep(0.01)

    async def stop_server(self) -> None:
        from devices.streaming import set_server_loop

        if self.server is not None:
            self.server.should_exit = True
            await self.server_task
        set_server_loop(None)

    def cleanup(self) -> None:
        from agents.runtime.models import Task
        from agents.runtime.services import lifecycle
        from devices.host import set_device_client
        from frontend.models import ApiToken

        lifecycle.set_step_scheduler(None)
        set_device_client(None)
        Task.objects.filter(device=self.device).delete()
        ApiToken.objects.filter(user=self.user).delete()
        self.device.delete()
        self.sock.close()


def _layer_name() -> str:
    from django.conf import settings

    return settings.CHANNEL_LAYERS["default"]["BACKEND"].rsplit(".", 1)[-1]


def _run(main: Callable[[], Any]) -> Any:
    """Run the bench's event loop; ORM set-up and cleanup stay outside it."""
    return asyncio.run(main())


# --- tickets -------------------------------------------------------------------------

BENCH_QUEUE = "kairos-bench"


def bench_tickets(samples: int = 50) -> dict[str, Any]:
    from django.db import connection

    from agents.brain.backends import register_backend
    from agents.runtime.models import Task
    from agents.runtime.services import lifecycle
    from agents.runtime.task_names import RUN_STEP, enqueue
    from kairos_web.celery import start_worker_thread

    register_backend("bench-ticket", LowConfidenceBackend)
    rig = _Rig()
    lifecycle.set_step_scheduler(
        lambda task_id, index: enqueue(RUN_STEP, args=(task_id, index), queue=BENCH_QUEUE))
    performed: list[Callable[[float], None]] = []
    perform = rig.phone.perform

    def timed_perform(action: Any) -> Any:
        outcome = perform(action)
        done = time.perf_counter()
        while performed:
            performed.pop(0)(done)
        return outcome

    rig.phone.perform = timed_perform  # type: ignore[method-assign]

    warmup = 3
    task = Task.objects.create(owner=rig.user, device=rig.device, instruction="bench tickets",
                               threshold=4.0, backend="bench-ticket",
                               max_steps=samples + warmup + 10)
    notify: list[float] = []
    approve: list[float] = []

    def post_approve(ticket_id: str) -> None:
        request = urllib.request.Request(
            f"http://127.0.0.1:{rig.port}/api/tickets/{ticket_id}/resolve", method="POST",
            data=json.dumps({"decision": "approve"}).encode(),
            headers={"Authorization": f"Bearer {rig.token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        await rig.start_server()
        worker = start_worker_thread(queues=[BENCH_QUEUE])
        try:
            async with rig.ws("/ws/operator/") as ws:
                await asyncio.to_thread(lifecycle.start_task, task)
                for n in range(samples + warmup):
                    while True:
                        event = json.loads(await asyncio.wait_for(ws.recv(), 20))
                        if event["type"] == "ticket.opened":
                            break
                    received = time.time()
                    ticket = event["ticket"]
                    created = datetime.fromisoformat(ticket["created_at"]).timestamp()
                    executed: asyncio.Future = loop.create_future()
                    performed.append(lambda t: loop.call_soon_threadsafe(executed.set_result, t))
                    started = time.perf_counter()
                    await asyncio.to_thread(post_approve, ticket["id"])
                    done = await asyncio.wait_for(executed, 20)
                    if n >= warmup:
                        notify.append((received - created) * 1000)
                        approve.append((done - started) * 1000)
        finally:
            # A daemon thread, joined briefly: stopping a worker whose Redis consumer sits
            # in BRPOP can block until the broker answers, and must not hold up the exit.
            stopper = threading.Thread(target=worker.stop, kwargs={"in_sighandler": False},
                                       daemon=True)
            stopper.start()
            await asyncio.to_thread(stopper.join, 5)
            await rig.stop_server()

    try:
        _run(main)
    finally:
        rig.cleanup()
    return {
        "bench": "tickets", "samples": len(notify),
        "notify_p50_ms": round(statistics.median(notify), 2) if notify else None,
        "notify_p95_ms": round(percentile(notify, 0.95), 2) if notify else None,
        "approve_to_action_p50_ms": round(statistics.median(approve), 2) if approve else None,
        "approve_to_action_p95_ms": round(percentile(approve, 0.95), 2) if approve else None,
        "database": connection.vendor, "channel_layer": _layer_name(),
    }


# --- stream --------------------------------------------------------------------------

class NothingToMeasure(RuntimeError):
    """The bench could not set up what it measures (it would report 0 frames)."""


def bench_stream(viewers: int = 1, seconds: float = 5.0, warmup: float = 1.0,
                 device: str = "sim", drive_hz: float = DRIVE_HZ) -> dict[str, Any]:
    """``device`` "sim": the simulator's frames straight to the fan-out. "adb-fake": the
    adb driver's scrcpy video through the real adb server from a fake phone that encodes
    the simulator's screen to H.264 (decode + JPEG once per frame, then the fan-out);
    latency runs from the fake phone's encoder to the viewer's socket."""
    from django.db import connection

    from devices.actions import Action
    from devices.streaming import device_group

    if device not in ("sim", "adb-fake"):
        raise NothingToMeasure(f"unknown bench device '{device}' (use 'sim' or 'adb-fake')")
    adb: dict[str, Any] = {}
    phone: Any = None
    if device == "adb-fake":
        adb = _adb_fake_phone(drive_hz)  # the fake phone types into its own field
        rig = _Rig(adb["device"])
    else:
        rig = _Rig()
        phone = rig.phone
        try:
            focus_text_field(phone)
        except NoTextField as exc:
            rig.cleanup()
            raise NothingToMeasure(f"{exc}; bench stream would measure 0 frames") from None
        except Exception:
            rig.cleanup()
            raise
    published: dict[bytes, float] = {}
    stop = threading.Event()
    stop_driving = threading.Event()
    measuring = threading.Event()
    last_seen: list[bytes] = [b""] * viewers
    results: dict[str, Any] = {}

    def drive() -> None:
        n = 0
        next_at = time.perf_counter()
        while phone is not None and not stop.is_set() and not stop_driving.is_set():
            n += 1
            phone.perform(Action("TYPE", text=f"bench {n}"))
            next_at += 1 / drive_hz
            delay = next_at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)  # the driver paces the screen; nothing to await

    def watch() -> None:
        frames: list[list[float]] = [[] for _ in range(viewers)]
        sizes: list[int] = []
        latencies: list[float] = []

        first: list[float] = []

        async def viewer(i: int) -> None:
            connecting = time.perf_counter()
            async with rig.ws(f"/ws/devices/{rig.device.id}/screen/") as ws:
                async for message in ws:
                    if stop.is_set():
                        break
                    if isinstance(message, str):
                        continue
                    now = time.perf_counter()
                    last_seen[i] = message
                    if connecting:
                        first.append((now - connecting) * 1000)
                        connecting = 0.0
                    if measuring.is_set():
                        frames[i].append(now)
                        sizes.append(len(message))
                        sent = published.get(message)
                        if sent is not None:
                            latencies.append((now - sent) * 1000)

        async def all_viewers() -> None:
            started = time.thread_time()
            tasks = [asyncio.create_task(viewer(i)) for i in range(viewers)]
            await asyncio.get_running_loop().run_in_executor(None, stop.wait)
            results["viewer_cpu_s"] = time.thread_time() - started
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run(all_viewers())
        results.update(frames=frames, sizes=sizes, latencies=latencies, first=first)

    async def main() -> None:
        await rig.start_server()
        layer_group = device_group(str(rig.device.id))
        from channels.layers import get_channel_layer

        layer = get_channel_layer()

        async def publish() -> None:
            last = -1
            while not stop.is_set():
                frame = await asyncio.to_thread(rig.phone.wait_for_frame, last, 0.5)
                if frame is None:
                    continue
                last = frame.number
                if adb:
                    encoded = adb["encoded_at"](frame.jpeg)
                    if encoded is not None:
                        published[frame.jpeg] = encoded
                else:
                    published[frame.jpeg] = time.perf_counter()
                await layer.group_send(layer_group, {
                    "type": "screen.frame", "number": frame.number, "jpeg": frame.jpeg,
                    "width": frame.width, "height": frame.height})

        publisher = asyncio.create_task(publish())
        driver = threading.Thread(target=drive, daemon=True, name="bench-driver")
        watcher = threading.Thread(target=watch, daemon=True, name="bench-viewers")
        driver.start()
        watcher.start()
        await asyncio.sleep(warmup)  # viewers connect, the stream settles
        cpu_start, wall_start = time.process_time(), time.perf_counter()
        measuring.set()
        await asyncio.sleep(seconds)
        measuring.clear()
        results["cpu_s"] = time.process_time() - cpu_start
        results["wall_s"] = time.perf_counter() - wall_start
        results["wall_start"] = wall_start
        if adb:
            results["last_frame_shown"] = await _last_frame_shown(adb, driver, stop_driving,
                                                                  last_seen)
        stop.set()
        await asyncio.to_thread(watcher.join, 10)
        await asyncio.to_thread(driver.join, 10)
        publisher.cancel()
        await asyncio.gather(publisher, return_exceptions=True)
        await rig.stop_server()

    try:
        _run(main)
    finally:
        rig.cleanup()
        _close_adb(adb)
    wall = results["wall_s"]
    per_viewer = [len(f) / wall for f in results["frames"]]
    latencies = results["latencies"]
    # The viewers' thread ran during warm-up too; scale its CPU to the measured window.
    viewer_cpu = results.get("viewer_cpu_s", 0.0) * seconds / (seconds + warmup)
    server_cpu = max(0.0, results["cpu_s"] - viewer_cpu)
    return {
        "bench": "stream", "viewers": viewers, "seconds": round(wall, 2),
        "frames": sum(len(f) for f in results["frames"]),
        "screen_changes_per_s": drive_hz,
        "fps_per_viewer": round(min(per_viewer), 1) if per_viewer else 0.0,
        "fps_per_viewer_mean": round(statistics.mean(per_viewer), 1) if per_viewer else 0.0,
        "frame_latency_p50_ms": round(statistics.median(latencies), 2) if latencies else None,
        "frame_latency_p95_ms": round(percentile(latencies, 0.95), 2) if latencies else None,
        "first_frame_max_ms": round(max(results["first"]), 2) if results["first"] else None,
        "bytes_per_frame": round(statistics.mean(results["sizes"])) if results["sizes"] else 0,
        "device": device,
        **({"last_frame_shown": results.get("last_frame_shown"),
            # what the phone itself produced: viewers cannot get more than this
            "phone_fps": round(adb["sent_between"](results["wall_start"],
                                                   results["wall_start"] + wall) / wall, 1)}
           if adb else {}),
        "server_cpu_s": round(server_cpu, 3),
        "server_cpu_per_s": round(server_cpu / wall, 3),
        "viewer_clients_cpu_s": round(viewer_cpu, 3),
        "database": connection.vendor, "channel_layer": _layer_name(),
    }


# --- the fake adb phone of ``bench stream --device adb-fake`` ---------------------------

def _adb_fake_phone(drive_hz: float) -> dict[str, Any]:
    """A fake phone in its own process (``python -m devices.adb.fake``: its rendering and
    encoding are the phone's work, not the server's), the real adb server connected to
    it, and the adb driver with its scrcpy session up."""
    import subprocess
    import sys

    from devices.adb.driver import AdbDevice
    from devices.adb.fake.rig import FakeAdbRig

    proc = subprocess.Popen([sys.executable, "-m", "devices.adb.fake", "--drive-hz",
                             str(drive_hz)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, bufsize=1)
    sent: dict[int, float] = {}
    last: list[str] = []
    got_last = threading.Event()
    first = proc.stdout.readline().split() if proc.stdout else []
    if first[:1] != ["serial"]:
        proc.kill()
        raise NothingToMeasure("the fake phone did not start")

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            parts = line.split()
            if parts[:1] == ["sent"]:
                sent[int(parts[1])] = float(parts[2])
            elif parts[:1] == ["last"]:
                last.append(parts[1])
                got_last.set()

    threading.Thread(target=read, daemon=True, name="bench-fake-phone").start()
    adb_rig = FakeAdbRig()
    adb_rig.client.connect(first[1], timeout=10)
    adb_rig.wait_state(first[1], "device")
    pts_of: dict[bytes, int] = {}
    driver = AdbDevice(first[1], adb_rig.client, video=True, timeout=10)
    driver.session.on_frame = lambda frame, pts: pts_of.__setitem__(frame.jpeg, pts)
    adb = {"device": driver, "rig": adb_rig, "proc": proc}
    if not driver.session.wait_up(15):
        _close_adb(adb)
        raise NothingToMeasure("the fake phone's scrcpy video did not start")

    def encoded_at(jpeg: bytes) -> float | None:
        pts = pts_of.pop(jpeg, None)
        return sent.get(pts) if pts is not None else None

    def last_sent_pts() -> int | None:
        """Stop the typing; the pts of the last frame the phone encodes."""
        assert proc.stdin is not None
        proc.stdin.write("stop\n")
        proc.stdin.flush()
        if not got_last.wait(10) or last[0] == "none":
            return None
        return int(last[0])

    def sent_between(start: float, end: float) -> int:
        return sum(1 for at in list(sent.values()) if start <= at < end)

    adb.update(encoded_at=encoded_at, last_sent_pts=last_sent_pts, sent_between=sent_between)
    return adb


async def _last_frame_shown(adb: dict[str, Any], driver: threading.Thread,
                            stop_driving: threading.Event, last_seen: list[bytes]) -> bool:
    """Once the screen stops changing, does every viewer show the last frame the phone
    encoded? A decoder a frame behind never shows it (nothing pushes it out)."""
    stop_driving.set()
    await asyncio.to_thread(driver.join, 10)
    target = await asyncio.to_thread(adb["last_sent_pts"])
    session = adb["device"].session
    deadline = time.perf_counter() + 5
    while time.perf_counter() < deadline:
        frame = session.latest_frame()
        if (target is not None and session.frame_pts == target and frame is not None
                and all(seen == frame.jpeg for seen in last_seen)):
            return True
        await asyncio.sleep(0.02)  # polling other threads' progress in a bench, not a test
    return False


def _close_adb(adb: dict[str, Any]) -> None:
    if adb:
        adb["device"].close()
        adb["rig"].close()
        adb["proc"].kill()
        adb["proc"].wait(10)
