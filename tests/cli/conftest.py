"""The command line's tests run once per backend, on the fixtures of the API's tests (a
command is often checked by what the API or the store then sees)."""

from tests.api.conftest import api, backend, make_api, store, tables  # noqa: F401
