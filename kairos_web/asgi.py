"""ASGI entry point: HTTP through Django, WebSockets through Channels."""
import os
import warnings

# Static files (WhiteNoise) and step screenshots (django.views.static) are file responses
# with synchronous iterators; under ASGI Django reads them in a worker thread, which is
# right for these small files, and would otherwise warn on every single one.
warnings.filterwarnings(
    "ignore", message="StreamingHttpResponse must consume synchronous iterators",
    module="django.core.handlers.asgi")

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kairos_web.settings")
django_asgi_app = get_asgi_application()

from django.conf import settings  # noqa: E402
from django.core.exceptions import ImproperlyConfigured  # noqa: E402

if settings.INSECURE_SECRET_KEY:
    raise ImproperlyConfigured(
        "SECRET_KEY is not set. Set SECRET_KEY for production, or DEBUG=1 for development."
    )

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from agents.runtime.consumers import OperatorConsumer, TaskConsumer  # noqa: E402
from devices.consumers import ScreenConsumer  # noqa: E402
from devices.sockets import AllowedHostsOrigin, UnknownPath  # noqa: E402

websocket_urlpatterns = [
    path("ws/operator/", OperatorConsumer.as_asgi()),
    path("ws/devices/<uuid:device_id>/screen/", ScreenConsumer.as_asgi()),
    path("ws/tasks/<uuid:task_id>/", TaskConsumer.as_asgi()),
    # Last: any other path is closed with 4404 (devices.sockets.UnknownPath).
    re_path(r"^.*$", UnknownPath.as_asgi()),
]

application = ProtocolTypeRouter({
    "http": django_asgi_app,
    "websocket": AllowedHostsOrigin(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
})
