"""What the rule mixins (tests/model/recovery_rules.py, tests/model/race_rules.py) use of the
machine they are mixed into (tests/model/machine.py): declared for the type checker only, so the
machine's own definitions are the ones that run."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from forge.continuity.v1 import admission_pb2
from tests.model.harness import ModelStack
from tests.model.history import History
from tests.model.spec_model import SpecModel

if TYPE_CHECKING:
    import grpc

    from forge.continuity.v1 import execution_pb2, execution_pb2_grpc
    from tests.model.checking import Called
    from tests.model.spec_model import Answer, RunModel

Response = TypeVar("Response")


class MachineParts:
    stack: ModelStack
    history: History
    model: SpecModel
    submissions: dict[str, admission_pb2.RequestInvalidReadContinuityRequest]
    steps: int

    if TYPE_CHECKING:

        def _channel(self, service: str, token: str) -> grpc.Channel: ...

        def call(
            self,
            process: str,
            operation: str,
            value: dict[str, Any],
            send: Callable[[], Response],
            acknowledged: Callable[[Response], dict[str, Any]] = ...,
            refusal_writes: Callable[[Answer], bool] = ...,
        ) -> Called: ...

        def expect(self, operation: str, predicted: Answer, got: Called) -> None: ...

        def _worker(
            self, run: RunModel | None = None
        ) -> execution_pb2_grpc.ExecutionServiceStub: ...

        def _worker_of(self, token: str) -> execution_pb2_grpc.ExecutionServiceStub: ...

        def _claim_request(self, run: RunModel) -> execution_pb2.ClaimExecutionRequestRequest: ...
