"""The device host process of the full stack: owns the phones attached to this machine."""
from __future__ import annotations

import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from devices.host import RedisHostServer, build_sim_host


class Command(BaseCommand):
    help = "Serve this machine's devices (simulated phones) to workers and consoles over Redis."

    def add_arguments(self, parser):
        parser.add_argument("--devices", default=",".join(settings.KAIROS_SIM_DEVICES),
                            help="comma-separated simulated phone names (default: %(default)s)")

    def handle(self, *args, devices: str, **options):
        if not settings.REDIS_URL:
            raise CommandError("device_host needs REDIS_URL; the embedded default runs the host "
                               "inside 'serve'")
        names = [n.strip() for n in devices.split(",") if n.strip()]
        server = RedisHostServer(build_sim_host(names), settings.REDIS_URL)
        server.start()
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        self.stdout.write(f"device host serving {', '.join(names)}", ending="\n")
        self.stdout.flush()
        stop.wait()
        server.stop()
