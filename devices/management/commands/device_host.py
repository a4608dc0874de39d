"""The device host process of the full stack: owns the phones attached to this machine."""
from __future__ import annotations

import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from devices.host import RedisHostServer, attach_journal, build_sim_host


class Command(BaseCommand):
    help = "Serve this machine's devices (simulated phones) to workers and consoles over Redis."

    def add_arguments(self, parser):
        parser.add_argument("--devices", default=",".join(settings.KAIROS_SIM_DEVICES),
                            help="comma-separated simulated phone names (default: %(default)s)")
        parser.add_argument(
            "--journal", default=str(settings.VAR_DIR / "devices"),
            help="directory for the action log and the simulated phones' saved states, "
                 "restored at start; '' turns it off (default: %(default)s)")
        parser.add_argument(
            "--action-latency", type=float, default=0.0,
            help="seconds each simulated action takes, like a real phone's input "
                 "(fault drills; default 0)")

    def handle(self, *args, devices: str, journal: str, action_latency: float, **options):
        if not settings.REDIS_URL:
            raise CommandError("device_host needs REDIS_URL; the embedded default runs the host "
                               "inside 'serve'")
        names = [n.strip() for n in devices.split(",") if n.strip()]
        host = build_sim_host(names)
        host.action_latency = max(0.0, action_latency)
        restored = attach_journal(host, journal) if journal else []
        server = RedisHostServer(host, settings.REDIS_URL)
        server.start()
        if restored:
            self.stdout.write(f"restored the saved state of {', '.join(restored)}")
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        self.stdout.write(f"device host serving {', '.join(names)}", ending="\n")
        self.stdout.flush()
        stop.wait()
        server.stop()
