"""The floors of an admission's own call graph (bench/runtime_floor.py, ADR 0068) on real
processes and PostgreSQL: each answers an operator's admission with the bytes a real admission
answered, after crossing the same four hops and running the baseline's transaction; the runtime
floor is served by the services' own runtime (it refuses a caller it does not know), the bare one
by nothing but gRPC. What they cost is the bench's to measure, never a test's."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import grpc
import pytest
from sqlalchemy import create_engine, text

from bench import runtime_floor
from bench.baseline import floor_rows
from forge.continuity.v1 import admission_pb2_grpc
from shared.contract.channels import open_channel
from tests.conftest import require_postgres
from tests.support import POSTGRES_URL

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def schema_url() -> Iterator[str]:
    require_postgres()
    schema = f"t_{uuid.uuid4().hex[:16]}"
    admin = create_engine(POSTGRES_URL)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    separator = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{POSTGRES_URL}{separator}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(scope="module")
def floors(schema_url: str) -> Iterator[dict[str, runtime_floor.Floor]]:
    with runtime_floor.admission_floors(schema_url) as running:
        yield running


def _admissions(floor: runtime_floor.Floor, token: str) -> admission_pb2_grpc.AdmissionServiceStub:
    return admission_pb2_grpc.AdmissionServiceStub(
        open_channel(floor.services.targets["admission"], token)
    )


def _rows(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return int(
                connection.execute(text(f"SELECT count(*) FROM {floor_rows.name}")).scalar_one()
            )
    finally:
        engine.dispose()


@pytest.mark.parametrize("variant", runtime_floor.VARIANTS)
def test_a_floor_answers_what_an_admission_answered_after_its_hops_and_one_transaction(
    floors: dict[str, runtime_floor.Floor], schema_url: str, variant: str
) -> None:
    floor = floors[variant]
    sampled = runtime_floor.read_samples(floor.samples_file)[runtime_floor.ADMIT][1]
    before = _rows(schema_url)
    answer = _admissions(floor, "dev-operator-token").RequestInvalidReadContinuity(floor.request)
    assert answer.SerializeToString() == sampled
    assert answer.created  # a real admission's answer, not an empty message
    # The ledger's commit ran the bare baseline's one transaction of three rows.
    assert _rows(schema_url) - before == 3


def test_the_runtime_floor_runs_the_services_runtime_and_the_bare_one_does_not(
    floors: dict[str, runtime_floor.Floor],
) -> None:
    stranger = "not-a-known-token"
    with pytest.raises(grpc.RpcError) as refused:
        _admissions(floors["runtime"], stranger).RequestInvalidReadContinuity(
            floors["runtime"].request
        )
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert (
        _admissions(floors["bare"], stranger)
        .RequestInvalidReadContinuity(floors["bare"].request)
        .created
    )
