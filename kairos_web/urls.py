from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from frontend.api import api, api_not_found
from frontend.views import media_file

urlpatterns = [
    path("admin/", admin.site.urls),
    re_path(r"^api/$", api_not_found),  # not ninja's debug home page
    path("api/", api.urls),
    re_path(r"^api(?:/(?P<rest>.*))?$", api_not_found),
    path("", include("frontend.urls")),
    # Browsers ask for /favicon.ico on pages without an icon link (the API docs, admin).
    path("favicon.ico", RedirectView.as_view(url=static("frontend/favicon.svg"), permanent=True)),
    # Step screenshots, by their task's access rules (frontend.views.media_file).
    re_path(r"^media/(?P<path>.*)$", media_file, name="media"),
]

handler500 = "frontend.api.api_or_page_server_error"
