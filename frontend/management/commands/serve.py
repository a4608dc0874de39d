"""The ASGI server; in the embedded default also the worker and the device host."""
from __future__ import annotations

import asyncio
import errno
import logging
import socket
import threading
from typing import Any

import uvicorn
from django.conf import settings
from django.core.management.base import BaseCommand

logger = logging.getLogger(__name__)


def _mark_online(names: list[str]) -> None:
    """This process serves these phones now, whatever status a full-stack host left."""
    from devices.models import Device, DeviceStatus

    Device.objects.filter(name__in=names).exclude(status=DeviceStatus.ONLINE).update(
        status=DeviceStatus.ONLINE)


def port_problem(host: str, port: int) -> str:
    """Why ``serve`` could not listen on host:port, with what to do instead; "" if it can.

    Checked before anything starts (issue 26, item 7): uvicorn's own "address already in
    use" came after the migrations and the seeding, with no hint.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return f"cannot serve on {host}: {exc}"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                return f"cannot serve on {host}:{port}: {exc.strerror}"
            return (f"port {port} on {host} is already in use (another Kairos, or another "
                    f"program). Pick a free one: make demo PORT={port + 1}  (or "
                    f"manage.py serve --port {port + 1})")
    return ""


class EmbeddedServices:
    """The worker thread and the device host that ``serve`` runs in the embedded default."""

    def __init__(self) -> None:
        self.worker: Any = None
        self.stop = threading.Event()

    async def start(self) -> None:
        from devices.host import get_local_host
        from devices.streaming import set_server_loop

        set_server_loop(asyncio.get_running_loop())
        if not settings.EMBEDDED:
            return
        host = get_local_host()
        await asyncio.to_thread(_mark_online, list(host.devices))
        if host.journal is None:  # the phones keep their state across restarts of serve
            from devices.host import attach_journal

            await asyncio.to_thread(attach_journal, host, settings.VAR_DIR / "devices")
        for name in host.devices:
            asyncio.get_running_loop().create_task(self._publish(host.device(name), name))
        self._start_worker()

    def _start_worker(self) -> None:
        from kairos_web.celery import start_worker_thread

        # Not eager mode: HTTP requests only enqueue; this thread runs the agent steps.
        self.worker = start_worker_thread()

    async def _publish(self, device: Any, name: str) -> None:
        from channels.layers import get_channel_layer

        from devices.streaming import device_group, device_id_for

        layer = get_channel_layer()
        device_id = None
        last = -1
        while not self.stop.is_set():
            if device_id is None:
                device_id = await asyncio.to_thread(device_id_for, name)
                if device_id is None:  # not seeded yet
                    await asyncio.sleep(2)
                    continue
            frame = await asyncio.to_thread(device.wait_for_frame, last, 1.0)
            if frame is None:
                continue
            last = frame.number
            await layer.group_send(device_group(device_id), {
                "type": "screen.frame", "number": frame.number, "jpeg": frame.jpeg,
                "width": frame.width, "height": frame.height})

    async def shutdown(self) -> None:
        self.stop.set()
        if self.worker is not None:
            await asyncio.to_thread(self.worker.stop, in_sighandler=False)


class LifespanApp:
    """Adds ASGI lifespan to the Channels router, to start and stop embedded services."""

    def __init__(self, app: Any, services: EmbeddedServices):
        self.app = app
        self.services = services

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.services.start()
                except Exception as exc:
                    logger.exception("embedded services failed to start")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.services.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return


def build_app() -> LifespanApp:
    from kairos_web.asgi import application

    return LifespanApp(application, EmbeddedServices())


class Command(BaseCommand):
    help = "Serve Kairos over HTTP and WebSockets (embedded default: worker + phones inside)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--check-port", action="store_true",
                            help="only check that the port is free (make demo does, first)")

    def handle(self, *args, host: str, port: int, **options):
        from django.core.management.base import CommandError

        problem = port_problem(host, port)
        if problem:
            raise CommandError(problem)
        if options.get("check_port"):
            return
        mode = "embedded default (SQLite, in-process worker, simulated phones)" \
            if settings.EMBEDDED else "full stack (workers and device host run separately)"
        self.stdout.write(f"Kairos on http://{host}:{port}/  — {mode}")
        self.stdout.flush()
        # Logging stays Django's (settings.LOGGING): uvicorn must not add handlers of its
        # own, or every line would be printed twice; its access log gives one line per
        # request.
        # X-Forwarded-For is believed only from KAIROS_TRUSTED_PROXIES (default: nobody).
        # uvicorn's own default trusts 127.0.0.1, so any local proxy passing the client's
        # header on let a client choose its address, and a fresh lockout with it.
        trusted = settings.KAIROS_TRUSTED_PROXIES
        config = uvicorn.Config(build_app(), host=host, port=port, lifespan="on",
                                log_config=None, log_level=None, access_log=True,
                                ws_max_size=1 << 20, proxy_headers=bool(trusted),
                                forwarded_allow_ips=trusted or None)
        uvicorn.Server(config).run()
