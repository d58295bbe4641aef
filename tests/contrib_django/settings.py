"""Django settings of the tests of `recoup.contrib.django` (and of `makemigrations`): the app
beside the admin and a small billing app, on two databases, SQLite ("default") and PostgreSQL
("postgres", from RECOUP_TEST_POSTGRES_URL); each test runs on the one it is parametrised with
(the router sends every model there).

Test databases get a name unique to the process, so that concurrent runs on one PostgreSQL
server (several engineers, CI) never meet.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from typing import Any
from urllib.parse import unquote, urlsplit

from recoup.jobs.signing import new_signing_secret
from tests.conftest import DEFAULT_POSTGRES_URL

POSTGRES_URL = os.environ.get("RECOUP_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
_RUN = uuid.uuid4().hex[:10]


def _postgres(url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "postgres",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        "OPTIONS": {"connect_timeout": 3},
        # Set up alone when only PostgreSQL tests run (by default it would wait for "default").
        "TEST": {"NAME": f"test_recoup_django_{_RUN}", "DEPENDENCIES": []},
    }


SECRET_KEY = f"tests-only-{_RUN}"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ALLOWED_HOSTS = ["testserver"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "recoup.contrib.django",
    "tests.contrib_django.billing",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "tests.contrib_django.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
_TMP = tempfile.gettempdir()
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.path.join(_TMP, f"recoup_django_{_RUN}.sqlite3"),
        # A file, not memory: threads share it as separate connections would in production.
        "TEST": {"NAME": os.path.join(_TMP, f"test_recoup_django_{_RUN}.sqlite3")},
        "OPTIONS": {"timeout": 30},
    },
    "postgres": _postgres(POSTGRES_URL),
}
DATABASE_ROUTERS = ["tests.contrib_django.routing.ChosenDatabase"]
MIGRATION_MODULES = {"billing": None}  # the test app's tables come from its models
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast; tests only

RECOUP_SIGNING_SECRET = new_signing_secret()
RECOUP_PAYMENT_PROVIDER = "tests.contrib_django.billing.payments.provider"
RECOUP_INVOICE_BOOK = "tests.contrib_django.billing.payments.Invoices"
