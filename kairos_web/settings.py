"""Kairos settings: everything comes from the environment.

With no ``DATABASE_URL`` / ``REDIS_URL`` this is the embedded default: SQLite (WAL) under
``var/``, Celery on the in-memory broker with a worker thread inside ``serve``, the
in-memory channel layer and the simulated phones hosted in-process. With them set, the
full stack: PostgreSQL (psycopg 3), Redis as Celery broker and Channels layer, separate
worker and device-host processes.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def envbool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), not {value!r}")


def envint(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, not {value!r}") from None


def envfloat(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, not {value!r}") from None


DEV_SECRET_KEY = "kairos-development-only-secret-key-do-not-use-in-production"
DEBUG = envbool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY") or DEV_SECRET_KEY
# Offline commands (migrations, checks, run_task, evaluate) work with the development key;
# serving HTTP with it and DEBUG off is refused in kairos_web/asgi.py, where it would sign
# real sessions.
INSECURE_SECRET_KEY = SECRET_KEY == DEV_SECRET_KEY and not DEBUG
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "").split(",") if h.strip()]
if DEBUG and not ALLOWED_HOSTS:
    ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]", "testserver"]
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]

# HTTPS deployments (README "Security switches"). KAIROS_HTTPS=1 turns on the redirect,
# secure cookies and a year of HSTS; each can also be set on its own.
KAIROS_HTTPS = envbool("KAIROS_HTTPS", False)
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", KAIROS_HTTPS)
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", KAIROS_HTTPS)
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", KAIROS_HTTPS)
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 31536000 if KAIROS_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", KAIROS_HTTPS)
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", False)
# Behind a TLS-terminating proxy: the header it sets, e.g. "X-Forwarded-Proto: https".
if os.environ.get("SECURE_PROXY_SSL_HEADER"):
    _name, _, _value = os.environ["SECURE_PROXY_SSL_HEADER"].partition(":")
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _name.strip().upper().replace("-", "_"), _value.strip())
# Content-Security-Policy: "1" for Kairos's own policy, or a policy string ("" = none).
KAIROS_CSP = os.environ.get("KAIROS_CSP", "")
# Login throttling (frontend/security.py): failures per username and address, and the
# seconds they lock that pair out for.
KAIROS_LOGIN_MAX_FAILURES = envint("KAIROS_LOGIN_MAX_FAILURES", 5)
KAIROS_LOGIN_LOCKOUT = envint("KAIROS_LOGIN_LOCKOUT", 900)
# Proxies whose X-Forwarded-For / X-Forwarded-Proto `serve` believes (comma-separated
# addresses, or "*"). Unset: none — the client's address is the connection's, so nobody
# can pick their own address to sidestep the login lockout (issue 23.7).
KAIROS_TRUSTED_PROXIES = os.environ.get("KAIROS_TRUSTED_PROXIES", "").strip()
# Tasks one end user may have waiting for a phone at once (operators are not limited);
# beyond it a new task is refused with 429 (issue 23.7).
KAIROS_MAX_QUEUED_PER_USER = envint("KAIROS_MAX_QUEUED_PER_USER", 5)

VAR_DIR = Path(os.environ.get("KAIROS_VAR_DIR", BASE_DIR / "var"))
MEDIA_ROOT = VAR_DIR / "media"
MEDIA_URL = "/media/"
# Step screenshots show what people typed: readable by Kairos's own user only.
FILE_UPLOAD_PERMISSIONS = 0o600
FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o700
STATIC_ROOT = VAR_DIR / "static"
STATIC_URL = "/static/"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "ninja",  # serves Swagger UI's files for /api/docs from here, not a CDN
    "devices",
    "agents.runtime",  # the app labelled "agents": models, services, workers, sockets
    "agents.evaluation",  # no models: the suites, benchmarks and their commands
    "frontend",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "frontend.security.ContentSecurityPolicyMiddleware",
    "frontend.api.InputCheck",
]

ROOT_URLCONF = "kairos_web.urls"
ASGI_APPLICATION = "kairos_web.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "frontend.context_processors.roles",
            ],
        },
    },
]

DATABASE_URL = os.environ.get("DATABASE_URL", "")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("KAIROS_SQLITE_PATH", str(VAR_DIR / "kairos.sqlite3")),
            "OPTIONS": {
                # WAL lets the web server read while the worker thread writes; the busy
                # timeout makes a writer wait for the lock instead of failing at once.
                "init_command": (
                    "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=10000;"
                ),
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
            },
            # The test database is a WAL file like the one above, not Django's default
            # in-memory database: that one is in shared-cache mode, whose table locks fail
            # at once ("database table is locked") instead of waiting out the busy timeout,
            # so the worker thread and a request writing at once failed on a loaded
            # machine (issue 23, item 8). One file per test run (its process id).
            "TEST": {"NAME": str(Path(tempfile.gettempdir())
                                 / f"kairos-test-{os.getpid()}.sqlite3")},
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
        if not DEBUG else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

REDIS_URL = os.environ.get("REDIS_URL", "")
EMBEDDED = not REDIS_URL

if REDIS_URL:
    # Shared by every process (login throttling counts failures here).
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": REDIS_URL}}
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "capacity": 1500, "expiry": 30},
        }
    }
    CELERY_BROKER_URL = REDIS_URL
else:
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 1500}}
    }
    CELERY_BROKER_URL = "memory://localhost/"
    # The in-memory transport polls; at its default of one second every agent step and
    # every approval would wait up to a second for the worker thread to notice it.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"polling_interval": 0.01}

CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Steps are idempotent, so a message is acknowledged only after its step ran: a worker
# that dies mid-step gets it redelivered. The in-memory broker dies with its process, so
# there is nothing to redeliver, and late acks from the worker's threads race the
# consumer's own bookkeeping there (a step then waits ~2 s to be picked up).
CELERY_TASK_ACKS_LATE = bool(REDIS_URL)
CELERY_TASK_REJECT_ON_WORKER_LOST = bool(REDIS_URL)
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = envint("KAIROS_STEP_TIME_LIMIT", 300)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 10
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# --- Kairos ---------------------------------------------------------------------------
KAIROS_DEFAULT_THRESHOLD = envfloat("KAIROS_DEFAULT_THRESHOLD", 4.0)
if not 0 <= KAIROS_DEFAULT_THRESHOLD <= 5:
    raise ImproperlyConfigured("KAIROS_DEFAULT_THRESHOLD must be between 0 and 5")
KAIROS_MAX_STEPS = envint("KAIROS_MAX_STEPS", 30)
# The share of the steps that would act alone that are asked anyway, at random, as
# ``spot_check`` tickets: their decisions measure the real autonomy precision (issue 24).
# A phone's own share (on /review/calibration/) overrides it.
KAIROS_SPOT_CHECK = envfloat("KAIROS_SPOT_CHECK", 0.05)
if not 0 <= KAIROS_SPOT_CHECK <= 1:
    raise ImproperlyConfigured("KAIROS_SPOT_CHECK must be between 0 and 1")
# States the simulator's oracle may search from one state before it reports no path (a
# dead end); evaluation only (`evaluate --oracle-budget` overrides it).
KAIROS_ORACLE_BUDGET = envint("KAIROS_ORACLE_BUDGET", 50_000)
if KAIROS_ORACLE_BUDGET < 1:
    raise ImproperlyConfigured("KAIROS_ORACLE_BUDGET must be at least 1")
# The experience memory (issue 25): every backend proposes from what people confirmed
# before, and every ticket decision teaches it. Off: the agent never learns or uses it.
KAIROS_EXPERIENCE = envbool("KAIROS_EXPERIENCE", True)
# The shipped prior of the memory's confidence (agents/brain/calibration/shipped/
# experience_prior.json); off: only this installation's own record counts.
KAIROS_EXPERIENCE_PRIOR = envbool("KAIROS_EXPERIENCE_PRIOR", True)
KAIROS_DEVICE_TIMEOUT = envfloat("KAIROS_DEVICE_TIMEOUT", 10.0)
KAIROS_CLARIFICATION_TIMEOUT = envfloat("KAIROS_CLARIFICATION_TIMEOUT", 300.0)
# A running task whose step was scheduled or started this long ago without moving is
# recovered by the workers' stall sweep (agents/runtime/recovery.py), which runs this often.
KAIROS_STALL_SECONDS = envfloat("KAIROS_STALL_SECONDS", 60.0)
KAIROS_SWEEP_INTERVAL = envfloat("KAIROS_SWEEP_INTERVAL", 10.0)
if KAIROS_STALL_SECONDS <= KAIROS_DEVICE_TIMEOUT:
    # An action still in flight must never be taken for a dead one.
    raise ImproperlyConfigured("KAIROS_STALL_SECONDS must be longer than KAIROS_DEVICE_TIMEOUT")
# Seconds after which an idle operator's claim on a ticket lapses (docs/console.md).
KAIROS_CLAIM_TIMEOUT = envfloat("KAIROS_CLAIM_TIMEOUT", 300.0)
# A refit of the evidence calibrators after every this many new labels (0: nightly only);
# agents/runtime/learning.py, docs/models.md "Versions and refits".
KAIROS_REFIT_EVERY = envint("KAIROS_REFIT_EVERY", 50)
if KAIROS_REFIT_EVERY < 0:
    raise ImproperlyConfigured("KAIROS_REFIT_EVERY must be 0 (nightly only) or more")
# Seconds without an input after which an operator's take-over lapses: the task goes back
# to the queue as an open ticket (agents/runtime/recovery.py; docs/console.md).
KAIROS_TAKEOVER_TIMEOUT = envfloat("KAIROS_TAKEOVER_TIMEOUT", 300.0)
# Seconds a ticket may wait before the console marks it late (the queue's SLA warning).
KAIROS_TICKET_SLA = envfloat("KAIROS_TICKET_SLA", 120.0)
KAIROS_SIM_DEVICES = [
    n.strip() for n in os.environ.get("KAIROS_SIM_DEVICES", "sim-1,sim-2").split(",") if n.strip()
]
# Android phones over adb: the adb server is found where adb's own clients look for it.
ANDROID_ADB_SERVER_PORT = envint("ANDROID_ADB_SERVER_PORT", 5037)
KAIROS_ADB_HOST = os.environ.get("KAIROS_ADB_HOST", "127.0.0.1")
KAIROS_ADB = os.environ.get("KAIROS_ADB", "auto")  # device_host: serve adb phones? auto|on|off
if KAIROS_ADB not in ("auto", "on", "off"):
    raise ImproperlyConfigured("KAIROS_ADB must be auto, on or off")
KAIROS_ADB_CONNECT = [  # Wi-Fi phones (host:port) the device host keeps `adb connect`-ed
    a.strip() for a in os.environ.get("KAIROS_ADB_CONNECT", "").split(",") if a.strip()
]
KAIROS_ADB_MAX_SIZE = envint("KAIROS_ADB_MAX_SIZE", 800)  # live video: longest side, pixels

# Suite files a caller may name over the API besides the bundled ones (by file stem).
KAIROS_SUITES_DIR = os.environ.get("KAIROS_SUITES_DIR", "")
KAIROS_LLM_BASE_URL = os.environ.get("KAIROS_LLM_BASE_URL", "")
KAIROS_LLM_API_KEY = os.environ.get("KAIROS_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY", "")
KAIROS_LLM_MODEL = os.environ.get("KAIROS_LLM_MODEL", "")
KAIROS_DEFAULT_BACKEND = "openai" if (KAIROS_LLM_MODEL and (KAIROS_LLM_BASE_URL or KAIROS_LLM_API_KEY)) else "heuristic"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"no_403_tracebacks": {"()": "kairos_web.logging_filters.NoTracebackFor403"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        # Django's own console handler (DEBUG only) would print every warning a second
        # time next to the root handler's line.
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        "django.request": {"filters": ["no_403_tracebacks"]},
        "django.security": {"filters": ["no_403_tracebacks"]},
        "django.channels.server": {"level": "WARNING"},
        "celery": {"level": "WARNING"},
        # One line per HTTP request and WebSocket handshake (serve turns it on).
        "uvicorn.access": {"level": "INFO"},
        "uvicorn.error": {"level": "WARNING"},
    },
}
