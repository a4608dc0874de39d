from django.conf import settings
from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.urls import include, path, re_path
from django.views.static import serve as serve_media

from frontend.api import api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("", include("frontend.urls")),
    # Step screenshots. In the full stack put a web server or object store in front.
    re_path(r"^media/(?P<path>.*)$", login_required(serve_media), {"document_root": settings.MEDIA_ROOT}),
]
