from django.apps import AppConfig


class DevicesConfig(AppConfig):
    name = "devices"

    def ready(self) -> None:
        # Open sockets re-check their user's access when it changes (issue 23.3).
        from devices.socket_access import connect_signals

        connect_signals()
