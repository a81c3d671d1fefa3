"""Who the caller is and what its roles permit (AdmissionService.GetCallerPermissions)."""

from __future__ import annotations

from forge.continuity.v1 import admission_pb2
from services.client._base import ClientBase, invoke


class CallerCalls(ClientBase):
    """The caller's identity, roles and per-RPC authorization decisions."""

    def caller_permissions(self) -> admission_pb2.GetCallerPermissionsResponse:
        """The identity and roles the server authenticated for this token, and for every RPC of
        the admission and candidate services whether those roles permit it now (decided from the
        role table the server enforces). Reads only; the whole response is returned."""
        return invoke(
            self._admission.GetCallerPermissions, admission_pb2.GetCallerPermissionsRequest()
        )
