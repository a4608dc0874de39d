"""A URLconf with one view that fails, to see the 500 page a user would get."""
from django.urls import include, path


def boom(request):
    raise RuntimeError("a bug")


urlpatterns = [path("boom/", boom), path("", include("frontend.urls"))]
