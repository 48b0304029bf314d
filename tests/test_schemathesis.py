"""Property-based fuzzing of the REST API from its own OpenAPI schema: no server error, every
response matching its documented schema and status codes, schema-violating requests rejected.

Schema-valid requests may still be refused with a 422 naming the field (an unknown model or
format is a valid string), so the positive-acceptance check is left out."""

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.specs.openapi.checks import positive_data_acceptance  # noqa: E402

from app.web import create_app  # noqa: E402

schema = schemathesis.openapi.from_asgi("/openapi.json", create_app())


@schema.parametrize()
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_api_conforms(case):
    case.call_and_validate(excluded_checks=[positive_data_acceptance])
