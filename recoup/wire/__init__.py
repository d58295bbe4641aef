"""The wire schemas: the request and response models of the HTTP API, in one place that imports
nothing of `recoup.api`, so the app (`recoup.api`) and the Python client (`recoup.client`) share
them without one edge importing the other. `schemas`: /v1/jobs, /v1/schedules and what they
share (`schemas.common`); `dunning`: /v1/dunning and /v1/clock; `reports`: the recovery report's
review queue and merchant tags.

The models' class names are the OpenAPI document's component names: renaming one changes
/openapi.json."""

# A string that holds a lone surrogate, refused by the models (`schemas.common`) and worded so
# in the problem a request gets (`recoup.api.validation`).
SURROGATE_MESSAGE = "expected no lone UTF-16 surrogates (\\ud800-\\udfff)"
