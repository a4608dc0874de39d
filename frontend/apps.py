from django.apps import AppConfig


class FrontendConfig(AppConfig):
    name = "frontend"

    def ready(self) -> None:
        from django.contrib import admin

        from frontend import checks  # noqa: F401  (registers the deploy checks)
        from frontend.security import ThrottledAdminLoginForm

        # /admin/login/ is throttled like /login/ (frontend/security.py).
        admin.site.login_form = ThrottledAdminLoginForm
