from django.conf import settings
from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from django.views.static import serve as serve_media

from frontend.api import api, api_not_found

urlpatterns = [
    path("admin/", admin.site.urls),
    re_path(r"^api/$", api_not_found),  # not ninja's debug home page
    path("api/", api.urls),
    re_path(r"^api(?:/(?P<rest>.*))?$", api_not_found),
    path("", include("frontend.urls")),
    # Browsers ask for /favicon.ico on pages without an icon link (the API docs, admin).
    path("favicon.ico", RedirectView.as_view(url=static("frontend/favicon.svg"), permanent=True)),
    # Step screenshots. In the full stack put a web server or object store in front.
    re_path(r"^media/(?P<path>.*)$", login_required(serve_media), {"document_root": settings.MEDIA_ROOT}),
]

handler500 = "frontend.api.api_or_page_server_error"
