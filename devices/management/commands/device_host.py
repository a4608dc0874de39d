"""The device host process of the full stack: owns the phones attached to this machine.

Simulated phones by name (``--devices``) and every Android phone the local adb server
sees (``ANDROID_ADB_SERVER_PORT`` on ``KAIROS_ADB_HOST``), found again as they are plugged
in, go offline and come back. It prints what it owns and each change; ``--list`` prints
every live host on this Redis and what it owns.
"""
from __future__ import annotations

import json
import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from devices.host import (
    DeviceHost, RedisDeviceClient, RedisHostServer, announced_hosts, attach_journal,
    build_sim_host,
)


class Command(BaseCommand):
    help = ("Serve this machine's devices (simulated phones, adb phones) to workers and "
            "consoles over Redis. --list shows every live host and what it owns.")

    def add_arguments(self, parser):
        parser.add_argument("--devices", default=",".join(settings.KAIROS_SIM_DEVICES),
                            help="comma-separated simulated phone names (default: %(default)s;"
                                 " empty for none)")
        parser.add_argument(
            "--journal", default=str(settings.VAR_DIR / "devices"),
            help="directory for the action log and the simulated phones' saved states, "
                 "restored at start; '' turns it off (default: %(default)s)")
        parser.add_argument(
            "--action-latency", type=float, default=0.0,
            help="seconds each simulated action takes, like a real phone's input "
                 "(fault drills; default 0)")
        parser.add_argument("--adb", choices=("auto", "on", "off"), default=settings.KAIROS_ADB,
                            help="serve the phones of the local adb server (default: "
                                 "%(default)s; auto = when an adb server answers)")
        parser.add_argument("--no-video", action="store_true",
                            help="adb phones without the scrcpy live video (screencap only)")
        parser.add_argument("--list", action="store_true",
                            help="print every live device host and its devices, then exit")
        parser.add_argument("--json", action="store_true", help="with --list: JSON")

    def handle(self, *args, devices: str, journal: str, action_latency: float, adb: str,
               no_video: bool, **options):
        if not settings.REDIS_URL:
            raise CommandError("device_host needs REDIS_URL; the embedded default runs the host "
                               "inside 'serve'")
        if options["list"]:
            return self._list(options["json"])
        names = [n.strip() for n in devices.split(",") if n.strip()]
        watcher = self._adb_watcher(adb)  # before anything starts: --adb on may refuse
        host = build_sim_host(names)
        host.action_latency = max(0.0, action_latency)
        restored = attach_journal(host, journal) if journal else []
        server = RedisHostServer(host, settings.REDIS_URL, on_ownership=self._ownership)
        self.stdout.write(f"device host {server.host_id}")
        server.start()
        if restored:
            self.stdout.write(f"restored the saved state of {', '.join(restored)}")
        for name in names:
            state = "owns" if name in server.owned else "waits for (another host owns it)"
            self.stdout.write(f"  {state} {name} (sim)")
        self.stdout.flush()
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        reap = RedisDeviceClient(settings.REDIS_URL)
        while not stop.wait(1.0):
            if watcher is not None:
                self._follow_phones(watcher, host, server, video=not no_video)
            self._mark_unserved_offline(reap)
        server.stop()
        for device in list(host.devices.values()):
            close = getattr(device, "close", None)
            if close:
                close()

    # --- adb phones ------------------------------------------------------------------
    def _adb_watcher(self, mode: str):
        if mode == "off":
            return None
        from devices.adb.discovery import AdbWatcher
        from devices.adb.driver import adb_client

        client = adb_client(settings.KAIROS_ADB_HOST, settings.ANDROID_ADB_SERVER_PORT,
                            settings.KAIROS_DEVICE_TIMEOUT)
        watcher = AdbWatcher(client, tuple(settings.KAIROS_ADB_CONNECT))
        where = f"{settings.KAIROS_ADB_HOST}:{settings.ANDROID_ADB_SERVER_PORT}"
        first = watcher.poll()
        watcher.ready.clear()  # let the loop attach them, with the usual messages
        if watcher.server_error and mode == "on":
            raise CommandError(f"no adb server answers at {where} (start one with "
                               f"'adb start-server', or use --adb auto): {watcher.server_error}")
        self.stdout.write(f"  adb server {where}: "
                          + (f"not answering ({watcher.server_error})" if watcher.server_error
                             else f"{len(first.states)} phone(s) seen"))
        self.stdout.flush()
        return watcher

    def _follow_phones(self, watcher, host: DeviceHost, server: RedisHostServer,
                       video: bool) -> None:
        from devices.adb.driver import AdbDevice

        changes = watcher.poll()
        for serial in changes.gone:
            device = host.devices.get(serial)
            server.drop_device(serial)
            if device is not None:
                device.close()
            self._set_status(serial, "offline")
            self.stdout.write(f"  offline {serial} (adb: {changes.states.get(serial, 'gone')})")
        for serial in changes.appeared:
            try:
                device = AdbDevice(serial, watcher.client, timeout=settings.KAIROS_DEVICE_TIMEOUT,
                                   video=video, max_size=settings.KAIROS_ADB_MAX_SIZE)
            except Exception as exc:
                self.stderr.write(f"  cannot use {serial}: {exc}")
                watcher.forget(serial)
                continue
            self._register_phone(device)
            host.attach(serial, device)
            owned = server.serve_device(serial)
            self.stdout.write(f"  {'owns' if owned else 'waits for'} {serial} (adb, "
                              f"{device.model}, {device.info.width}x{device.info.height})")
        if changes.appeared or changes.gone:
            server.announce()
            self.stdout.flush()

    # --- database ----------------------------------------------------------------------
    @staticmethod
    def _register_phone(device) -> None:
        from devices.models import Device, DeviceKind

        Device.objects.update_or_create(name=device.serial, defaults={
            "kind": DeviceKind.ADB, "serial": device.serial, "width": device.info.width,
            "height": device.info.height,
            "apps": [{"name": a.name, "package": a.package} for a in device.info.apps]})

    @staticmethod
    def _set_status(name: str, status: str) -> None:
        from devices.models import Device

        Device.objects.filter(name=name).exclude(status=status).update(status=status)

    def _ownership(self, name: str, owned: bool) -> None:
        self._set_status(name, "online" if owned else "offline")

    def _mark_unserved_offline(self, client: RedisDeviceClient) -> None:
        """Phones of a host that died: no owner key any more, so offline."""
        from devices.models import Device

        names = list(Device.objects.filter(status="online").values_list("name", flat=True))
        try:
            present = client.present(names)
        except Exception:
            return
        for name, here in present.items():
            if not here:
                self._set_status(name, "offline")

    def _list(self, as_json: bool) -> None:
        hosts = announced_hosts(settings.REDIS_URL)
        if as_json:
            self.stdout.write(json.dumps(hosts))
            return
        if not hosts:
            self.stdout.write("no device host is running on this Redis")
        for host in hosts:
            self.stdout.write(f"{host['host']}")
            for name, kind in sorted(host["devices"].items()):
                self.stdout.write(f"  {name} ({kind})")
            for name in host.get("waiting", []):
                self.stdout.write(f"  {name} (waiting: another host owns it)")
