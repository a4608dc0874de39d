"""Idempotent demo data: groups, users and the two simulated phones."""
from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand
from django.db import transaction

from devices.models import Device, DeviceKind

USERS = (("operator", "operators"), ("user", "end_users"), ("admin", "admins"))


class Command(BaseCommand):
    help = "Create the demo groups, users (operator, user, admin) and simulated phones."

    def add_arguments(self, parser):
        parser.add_argument("--password", help="password for the demo users (else generated)")

    @transaction.atomic
    def handle(self, *args, password: str | None = None, **options):
        from devices.sim import SimDevice

        groups = {name: Group.objects.get_or_create(name=name)[0]
                  for name in ("operators", "end_users", "admins")}
        lines = []
        for username, group in USERS:
            user, created = User.objects.get_or_create(username=username)
            if created or password:
                pw = password or secrets.token_urlsafe(9)
                user.set_password(pw)
                lines.append(f"  {username:<9} {pw}   ({group})")
            else:
                lines.append(f"  {username:<9} (password unchanged)   ({group})")
            user.is_staff = username == "admin"
            user.is_superuser = username == "admin"
            user.save()
            user.groups.add(groups[group])
        for name in settings.KAIROS_SIM_DEVICES:
            phone = SimDevice(name)
            Device.objects.update_or_create(name=name, defaults={
                "kind": DeviceKind.SIM, "width": phone.info.width, "height": phone.info.height,
                "apps": [app.to_json() for app in phone.info.apps],
            })
        self.stdout.write("Demo logins:\n" + "\n".join(lines))
        self.stdout.write(f"Simulated phones: {', '.join(settings.KAIROS_SIM_DEVICES)}")
