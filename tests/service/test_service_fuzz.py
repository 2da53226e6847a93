"""The API fuzzed from its own OpenAPI schema (schemathesis): no 500, no answer the schema does not allow."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance
from service_server import Server, dataset_table

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fuzzed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = Server(tmp_path_factory.mktemp("fuzz"), dataset_table("train")).start()
    job = server.request("POST", "/v1/datasets/train/scans").json()
    server.wait_job(job["id"])
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def api_schema(fuzzed_server: Server) -> object:
    reader = {"Authorization": f"Bearer {fuzzed_server.tokens['reader']}"}  # the schema needs `read`
    return schemathesis.openapi.from_url(f"{fuzzed_server.base}/openapi.json", headers=reader)


def test_no_input_makes_the_service_fail_or_break_its_schema(
    api_schema: object, fuzzed_server: Server
) -> None:
    headers = {"Authorization": f"Bearer {fuzzed_server.tokens['admin']}"}
    operations = [result.ok() for result in api_schema.get_all_operations()]  # type: ignore[attr-defined]
    assert len(operations) >= 15

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def fuzz(case: schemathesis.Case) -> None:
            if case.method == "POST" and case.path.endswith("/scans"):
                case.path_parameters = {"name": "train"}  # real datasets only: each scan is a process
            case.call_and_validate(headers=headers, checks=[not_a_server_error, response_schema_conformance])

        fuzz()
    assert fuzzed_server.request("GET", "/healthz", token=None).status_code == 200


def test_the_service_log_has_no_traceback_after_fuzzing(fuzzed_server: Server, tmp_path: Path) -> None:
    assert "Traceback" not in fuzzed_server.log.read_text()
