"""Settings for the hosting project, read from the environment with django-environ.

Every value has an embedded default, so a clean clone runs with nothing set: SQLite,
the in-memory channel layer, turns run in-process, and the offline demo model. Setting
DATABASE_URL, REDIS_URL, CELERY_BROKER_URL and SAGENTS_MODEL switches to the production
stack without touching code, and the HTTPS variables (SECURE_*, *_COOKIE_SECURE) clear
``check --deploy``. A ``.env`` file beside manage.py is read only if present.
"""

from __future__ import annotations

import os
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

# litellm fetches a cost map from the internet at import and token counting for some
# model names tries a model hub; both must be off before anything imports litellm.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").is_file():
    environ.Env.read_env(BASE_DIR / ".env")

SECRET_KEY = env.str(
    "SECRET_KEY",
    default="django-insecure-dev-only-key-do-not-use-in-production-7c1f9e2a",
)
DEBUG = env.bool("DEBUG", default=True)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# HTTPS, for `manage.py check --deploy`: off by default (the development server speaks
# plain HTTP), each switched on from the environment once the site is served over TLS.
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=False)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=False)
# Seconds browsers must keep to HTTPS; raise it step by step, it cannot be taken back.
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool(
    "SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False
)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
# Behind a proxy that terminates TLS: the header and value it sets on HTTPS requests,
# e.g. "HTTP_X_FORWARDED_PROTO=https". Trust it only if the proxy always sets or
# strips that header.
_proxy_header = env.str("SECURE_PROXY_SSL_HEADER", default="")
if _proxy_header:
    _header, _, _value = (part.strip() for part in _proxy_header.partition("="))
    if not (_header.startswith("HTTP_") and _value):
        raise ImproperlyConfigured(
            "SECURE_PROXY_SSL_HEADER must look like HTTP_X_FORWARDED_PROTO=https, "
            f"not {_proxy_header!r}"
        )
    SECURE_PROXY_SSL_HEADER = (_header, _value)

INSTALLED_APPS = [
    # daphne first: its runserver replaces Django's and serves ASGI (WebSockets).
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "sagents_django",
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
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "project.urls"
ASGI_APPLICATION = "project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Inline turns write from the runtime's thread while requests write from theirs:
    # WAL lets readers go on, IMMEDIATE takes the write lock up front (no deadlock
    # between two readers turned writers), and a writer waits instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "init_command": "PRAGMA journal_mode=WAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        }
    )
    # Tests in a file too: SQLite's shared in-memory database fails a reader that
    # meets another thread's writer at once ("database table is locked") instead
    # of waiting, and the runtime writes from its own thread.
    DATABASES["default"]["TEST"] = {
        "NAME": env.str(
            "SQLITE_TEST_NAME", default=str(BASE_DIR / "test-database.sqlite3")
        )
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# No REDIS_URL: one process, so the in-memory layer is enough. With it, every daphne
# process and Celery worker shares one Redis-backed layer: the Pub/Sub one, whose send
# costs a fifth of the list-based RedisChannelLayer's (0.16 against 0.82 ms of CPU,
# measured here) and which is just as at-most-once; the database stays the truth.
REDIS_URL = env.str("REDIS_URL", default="")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": env.str(
                "CHANNEL_LAYER_BACKEND",
                default="channels_redis.pubsub.RedisPubSubChannelLayer",
            ),
            "CONFIG": {"hosts": [REDIS_URL]},
        },
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Celery only runs turns when SAGENTS["EXECUTOR"] is "celery"; the memory:// default
# keeps the app importable with no broker. Results are not stored: AgentRun rows are
# the record of a turn.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="memory://")
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_TASK_IGNORE_RESULT = True
# Redis re-delivers an unacknowledged task after the visibility timeout and runs it a
# second time concurrently, so it must exceed the longest turn (the run lease handles
# dead workers, not the broker).
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=12 * 60 * 60),
}
# kombu's Redis transport with the fix that keeps a worker alive when Redis restarts
# under a running turn (sagents_django/redis_broker.py says why). Only for Redis:
# a transport named here wins over the URL's scheme.
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CELERY_BROKER_TRANSPORT = "sagents_django.redis_broker:Transport"

SAGENTS_MODEL = env.str("SAGENTS_MODEL", default="sagents/demo")
SAGENTS = {
    "FACTORY": "project.agents.factory.build_agent",
    "AGENT_PERSISTENCE": "project.agents.agent_persistence.AgentPersistence",
    "DISPLAY_PERSISTENCE": (
        "project.agents.display_message_persistence.DisplayMessagePersistence"
    ),
    "MODEL": SAGENTS_MODEL,
    "MODEL_PARAMS": {},
    # A configured broker means workers exist to run turns; otherwise run them inline.
    "EXECUTOR": env.str(
        "SAGENTS_EXECUTOR",
        default="celery" if "CELERY_BROKER_URL" in os.environ else "inline",
    ),
    # Seconds a daphne process told to stop goes on serving while "not ready".
    "DRAIN_SECONDS": env.float("SAGENTS_DRAIN_SECONDS", default=5.0),
}

AUTH_PASSWORD_VALIDATORS = [
    {
        "NAME": "django.contrib.auth.password_validation."
        "UserAttributeSimilarityValidator"
    },
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "sagents_django:home"
LOGOUT_REDIRECT_URL = "sagents_django:home"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
