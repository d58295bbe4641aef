"""The Python client's tests run once per backend, against the API the fixtures of the API's
tests serve."""

from tests.api.conftest import api, backend, make_api, store, tables  # noqa: F401
