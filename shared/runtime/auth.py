"""Authentication and authorization shared by the four services.

A caller presents ``authorization: Bearer <token>`` metadata (or, with mutual TLS, a client
certificate). The principals file maps the SHA-256 of each token (never the token itself) or an
mTLS subject common name to an identity and its roles::

    {"principals": [
        {"identity": "alice", "roles": ["factory_administrator"], "token_sha256": "<hex>"},
        {"identity": "admission", "roles": ["admission_service"], "mtls_subject": "admission"}
    ]}

Missing or unknown credentials are UNAUTHENTICATED; a known identity without the role is
PERMISSION_DENIED. Both are audited in the log.

A running service follows the file (:class:`PrincipalsFile`): it looks for a change at most every
FORGE_PRINCIPALS_RELOAD_SECONDS and then answers from the new content, for authentication and
for the ledger's re-check of recovery authority alike, so a role granted or revoked holds on every
replica within that bound, without a restart. A file that no longer parses is not applied: the
last good content stays in force and the refusal is logged.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from shared.runtime.errors import PermissionDenied, Unauthenticated


class Role(enum.Enum):
    """Roles, named as in the principals file (lowercase of the proto ``Role`` enum)."""

    FACTORY_ADMINISTRATOR = "factory_administrator"
    EXECUTION_OPERATOR = "execution_operator"
    WORKER = "worker"
    PLATFORM_WRITER = "platform_writer"
    READER = "reader"
    # One role per calling service: the candidate only reads; admission also commits.
    CANDIDATE_SERVICE = "candidate_service"
    ADMISSION_SERVICE = "admission_service"


#: The longest principal identity: every column that stores one (an actor, an owner, an
#: operator identity) holds this many characters, and a longer value must be refused, never
#: stored cut (an entry's hash is sealed over the whole actor). Declared here, with the
#: principals it bounds; the rules (shared.continuity.identifiers) read it from here.
MAX_IDENTITY_LENGTH = 256


# Any authenticated principal may read.
ANY_ROLE: frozenset[Role] = frozenset(Role)


@dataclass(frozen=True)
class Principal:
    """An authenticated caller."""

    identity: str
    roles: frozenset[Role]

    def has_any(self, roles: Iterable[Role]) -> bool:
        return not self.roles.isdisjoint(roles)


_current_principal: ContextVar[Principal | None] = ContextVar("current_principal", default=None)


def current_principal() -> Principal:
    """The principal of the RPC being served (set by the server bootstrap)."""
    principal = _current_principal.get()
    if principal is None:
        raise Unauthenticated("CREDENTIALS_MISSING", "no authenticated principal for this call")
    return principal


def set_current_principal(principal: Principal | None) -> object:
    return _current_principal.set(principal)


def reset_current_principal(token: object) -> None:
    _current_principal.reset(token)  # type: ignore[arg-type]


def token_digest(token: str) -> str:
    """Hex SHA-256 of a bearer token, as stored in the principals file."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class PrincipalDirectory:
    """Resolves credentials to principals. Immutable after load."""

    def __init__(
        self, by_token_digest: Mapping[str, Principal], by_subject: Mapping[str, Principal]
    ) -> None:
        self._by_token_digest = dict(by_token_digest)
        self._by_subject = dict(by_subject)

    def token_digests(self) -> frozenset[str]:
        """The SHA-256 of every token this directory accepts."""
        return frozenset(self._by_token_digest)

    @classmethod
    def from_document(cls, document: object) -> PrincipalDirectory:
        if not isinstance(document, dict) or not isinstance(document.get("principals"), list):
            raise ValueError('principals file must be {"principals": [...]}')
        by_token: dict[str, Principal] = {}
        by_subject: dict[str, Principal] = {}
        for entry in document["principals"]:
            identity = entry.get("identity")
            if not isinstance(identity, str) or not identity:
                raise ValueError("every principal needs a non-empty identity")
            if len(identity) > MAX_IDENTITY_LENGTH:
                # Refused here, at the file, so no call can carry an identity the ledger
                # would have to refuse when recording it as an actor.
                raise ValueError(
                    f"identity {identity[:32]}... is longer than {MAX_IDENTITY_LENGTH} characters"
                )
            roles = frozenset(Role(name) for name in entry.get("roles", []))
            principal = Principal(identity, roles)
            if digest := entry.get("token_sha256"):
                # Hex is case-insensitive: normalize before the duplicate check, or "ABC..." and
                # "abc..." would pass as two tokens and the later one would silently win.
                normalized = str(digest).lower()
                if normalized in by_token:
                    raise ValueError(f"token digest listed twice (identity {identity})")
                by_token[normalized] = principal
            if subject := entry.get("mtls_subject"):
                if str(subject) in by_subject:
                    raise ValueError(f"mTLS subject listed twice (identity {identity})")
                by_subject[str(subject)] = principal
            if not entry.get("token_sha256") and not entry.get("mtls_subject"):
                raise ValueError(f"principal {identity} has neither token_sha256 nor mtls_subject")
        return cls(by_token, by_subject)

    @classmethod
    def load(cls, path: str | Path) -> PrincipalDirectory:
        return cls.from_document(json.loads(Path(path).read_text(encoding="utf-8")))

    def roles_of(self, identity: str) -> frozenset[Role]:
        """Every role ``identity`` holds now, over all of its credentials."""
        principals = [*self._by_token_digest.values(), *self._by_subject.values()]
        return frozenset(
            role
            for principal in principals
            if principal.identity == identity
            for role in principal.roles
        )

    def authenticate(
        self, authorization: str | None, mtls_subjects: Iterable[str] = ()
    ) -> Principal:
        """The principal for the presented credentials, or UNAUTHENTICATED."""
        if authorization:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise Unauthenticated(
                    "CREDENTIALS_MALFORMED", "authorization metadata must be 'Bearer <token>'"
                )
            presented = token_digest(token.strip())
            for digest, principal in self._by_token_digest.items():
                if hmac.compare_digest(digest, presented):
                    return principal
            raise Unauthenticated("CREDENTIALS_UNKNOWN", "the bearer token is not recognised")
        for subject in mtls_subjects:
            if subject in self._by_subject:
                return self._by_subject[subject]
        # Under mutual TLS every caller has a certificate; one that names no principal (the
        # gateway's, a worker's) proves only the transport: the call still needs its token.
        raise Unauthenticated(
            "CREDENTIALS_MISSING",
            "call needs 'authorization: Bearer <token>' metadata"
            + (" (its client certificate names no principal)" if mtls_subjects else ""),
        )


def permits(principal: Principal, allowed: frozenset[Role]) -> bool:
    """The one authorization predicate: the principal holds one of the allowed roles."""
    return principal.has_any(allowed)


@dataclass(frozen=True)
class MethodDecision:
    """What :func:`authorize` decides for ``principal`` calling ``method``."""

    method: str
    permitted: bool
    required_roles: frozenset[Role]


def decisions(
    principal: Principal, method_roles: Mapping[str, frozenset[Role]]
) -> list[MethodDecision]:
    """The authorization decision for every method of a role table, sorted by method. Uses the
    predicate :func:`authorize` uses, so a listing never permits a call the server refuses."""
    return [
        MethodDecision(method, permits(principal, allowed), allowed)
        for method, allowed in sorted(method_roles.items())
    ]


def authorize(principal: Principal, allowed: frozenset[Role], method: str) -> None:
    """PERMISSION_DENIED unless the principal holds one of the allowed roles."""
    if not permits(principal, allowed):
        raise PermissionDenied(
            "ROLE_REQUIRED",
            f"{principal.identity} may not call {method}",
            metadata={
                "identity": principal.identity,
                "method": method,
                "required_roles": ",".join(sorted(role.value for role in allowed)),
            },
        )


def require_role(*roles: Role) -> Principal:
    """Inside a handler: the current principal, which must hold one of ``roles``."""
    principal = current_principal()
    authorize(principal, frozenset(roles), "this operation")
    return principal


class Directory(Protocol):
    """What the server bootstrap authenticates callers with: a directory or a followed file."""

    def authenticate(
        self, authorization: str | None, mtls_subjects: Iterable[str] = ()
    ) -> Principal: ...


log = logging.getLogger("forge.auth")


def _stamp(path: Path) -> tuple[int, int, int, int]:
    # stat follows symlinks: a Kubernetes Secret volume swaps a symlink, which changes the inode.
    info = os.stat(path)
    return (info.st_mtime_ns, info.st_size, info.st_ino, info.st_dev)


class PrincipalsFile:
    """The principals file, followed: at most every ``interval`` seconds a call checks the file's
    modification time, size and inode, and re-reads it when one changed. The first load must
    succeed (a service does not start without principals); later, a file that cannot be read or
    parsed keeps the last good directory in force and is logged once per change."""

    def __init__(
        self,
        path: str | Path,
        interval: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self.interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._stamp = _stamp(self.path)
        self._directory = PrincipalDirectory.load(self.path)
        self._checked = clock()

    def current(self) -> PrincipalDirectory:
        """The directory in force now (re-read first when the interval passed and the file
        changed)."""
        if self._clock() - self._checked >= self.interval:
            with self._lock:
                if self._clock() - self._checked >= self.interval:
                    self._reload()
                    self._checked = self._clock()
        return self._directory

    def _reload(self) -> None:
        try:
            stamp = _stamp(self.path)
        except OSError as error:
            if self._stamp != (0, 0, 0, 0):
                log.error(
                    "principals file %s unreadable, keeping the last good: %s", self.path, error
                )
            self._stamp = (0, 0, 0, 0)
            return
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            self._directory = PrincipalDirectory.load(self.path)
        except (OSError, ValueError, TypeError, AttributeError) as error:
            # Any malformed content (not JSON, a principal that is not an object, an unknown
            # role): the last good directory stays in force.
            log.error("principals file %s refused, keeping the last good: %s", self.path, error)
            return
        log.info("principals file %s reloaded", self.path)

    def authenticate(
        self, authorization: str | None, mtls_subjects: Iterable[str] = ()
    ) -> Principal:
        return self.current().authenticate(authorization, mtls_subjects)

    def role_names(self, identity: str) -> frozenset[str]:
        """Role names ``identity`` holds now: the ledger's authority source, so a recovery's
        commit re-checks against the same content authentication uses."""
        return frozenset(role.value for role in self.current().roles_of(identity))
