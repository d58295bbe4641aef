"""The Django project the docs' Django example is added to (tests/test_docs_examples.py): what
`django-admin startproject` would give, cut to what the example needs. The example's own
settings block is appended to these, as a user adds it to theirs; its files (billing/models.py,
billing/payments.py, urls.py) are written beside it as the docs show them."""

import os

SECRET_KEY = "docs-example-only"
DEBUG = False
ALLOWED_HOSTS = ["testserver"]
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "billing"]
MIDDLEWARE: list[str] = []
ROOT_URLCONF = "urls"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["DOCS_DJANGO_DB"],
        "OPTIONS": {"timeout": 30},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
MIGRATION_MODULES = {"billing": None}  # the example's table comes from its model
TIME_ZONE = "UTC"
