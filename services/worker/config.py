"""The worker's configuration, from the environment and the command line."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from services.worker.stopping import DEFAULT_STOP_GRACE_SECONDS
from shared.continuity.qualification import DEFAULT_QUALIFIED_PROFILE
from shared.runtime.config import DEFAULT_PORTS, ClientTls, client_tls, target_variable
from shared.runtime.limits import seconds

TOKEN = "FORGE_WORKER_TOKEN"  # noqa: S105 - the variable's name, not a credential
PROVIDER_URL = "FORGE_WORKER_PROVIDER_URL"
PROVIDER_KEY = "FORGE_WORKER_PROVIDER_KEY"
MODEL = "FORGE_WORKER_MODEL"
SOURCE_DIR = "FORGE_WORKER_SOURCE_DIR"
EVIDENCE_DIR = "FORGE_WORKER_EVIDENCE_DIR"
GRANTED_COMMANDS = "FORGE_WORKER_GRANTED_COMMANDS"
COMMAND_TIMEOUT = "FORGE_WORKER_COMMAND_TIMEOUT_SECONDS"
RUN_IDS = "FORGE_WORKER_RUN_IDS"
SOURCE_REVISION = "FORGE_WORKER_SOURCE_REVISION"
CONFIGURATION_DIGEST = "FORGE_WORKER_CONFIGURATION_DIGEST"
SOURCE_PROFILE = "FORGE_WORKER_SOURCE_PROFILE"
STOP_GRACE = "FORGE_WORKER_STOP_GRACE_SECONDS"
DEFAULT_COMMAND_TIMEOUT = 300.0


class ConfigurationError(ValueError):
    """The worker cannot start with this configuration."""


@dataclass(frozen=True)
class WorkerConfig:
    """Everything the worker needs; nothing here is read again while it runs."""

    ledger_target: str
    token: str
    run_ids: tuple[str, ...]
    provider_url: str
    provider_key: str
    source_dir: Path
    #: None: the checkpoint's model.
    model: str | None = None
    #: None: read_run_evidence reads the ledger journal of the run the query names.
    evidence_dir: Path | None = None
    granted_commands: frozenset[tuple[str, ...]] = frozenset()
    command_timeout_seconds: float = DEFAULT_COMMAND_TIMEOUT
    #: Only this execution request (else the first queued one of the runs).
    execution_request_id: str = ""
    #: The oldest eligible queued request of any run (``--all-runs``, fleet mode), not of run_ids.
    all_runs: bool = False
    verbose: bool = False
    #: What this worker presents at claim; the ledger refuses a claim when any differs from the
    #: run's. Revision: None derives it from ``source_dir`` (services.worker.source), a value is
    #: the deployment's declaration; configuration: the deployment's (None: the run's); profile:
    #: the installed adapter and SDK it runs, checked against the registered digest first.
    source_revision: str | None = None
    configuration_digest: str | None = None
    source_profile: str = DEFAULT_QUALIFIED_PROFILE
    #: Seconds the effect under way may take to finish after SIGTERM/SIGINT before it is
    #: abandoned (services.worker.stopping).
    stop_grace_seconds: float = DEFAULT_STOP_GRACE_SECONDS
    #: TLS to the ledger (FORGE_TLS_CA, and FORGE_TLS_CERT / FORGE_TLS_KEY: its client
    #: certificate, which a ledger requiring mutual TLS asks for); None: plaintext.
    tls: ClientTls | None = None


def granted_commands(text: str) -> frozenset[tuple[str, ...]]:
    """``FORGE_WORKER_GRANTED_COMMANDS``: a JSON list of argv lists, each run exactly as listed."""
    if not text:
        return frozenset()
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"{GRANTED_COMMANDS} is not JSON: {exc}") from exc
    if not isinstance(value, list) or not all(
        isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv) for argv in value
    ):
        raise ConfigurationError(f"{GRANTED_COMMANDS} must be a JSON list of argv string lists")
    return frozenset(tuple(argv) for argv in value)


def load(
    run_ids: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    ledger_target: str = "",
    execution_request_id: str = "",
    verbose: bool = False,
    all_runs: bool = False,
) -> WorkerConfig:
    """The configuration from ``env`` (default: the process environment) and the arguments."""
    env = os.environ if env is None else env
    runs = tuple(run_ids) or tuple(r for r in env.get(RUN_IDS, "").split(",") if r)
    missing = [name for name in (TOKEN, PROVIDER_URL, PROVIDER_KEY) if not env.get(name)]
    if missing:
        raise ConfigurationError(f"set {', '.join(missing)}")
    if not runs and not all_runs:
        raise ConfigurationError(f"name the runs to serve (arguments or {RUN_IDS}, or --all-runs)")
    source = Path(env.get(SOURCE_DIR) or ".").resolve()
    if not source.is_dir():
        raise ConfigurationError(f"{SOURCE_DIR}={source} is not a directory")
    evidence = Path(env[EVIDENCE_DIR]).resolve() if env.get(EVIDENCE_DIR) else None
    if evidence is not None and not evidence.is_dir():
        raise ConfigurationError(f"{EVIDENCE_DIR}={evidence} is not a directory")
    try:
        # Read as the services read seconds; unlike theirs these are not bounded above, and the
        # grace may be 0 (abandon at once).
        timeout = seconds(env, COMMAND_TIMEOUT, DEFAULT_COMMAND_TIMEOUT)
        grace = seconds(env, STOP_GRACE, DEFAULT_STOP_GRACE_SECONDS)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from exc
    # A command's bound must be a finite positive time (0, a negative number or NaN would end
    # every command at once, or never); the grace may be 0 but must be finite.
    if not 0 < timeout < math.inf:
        raise ConfigurationError(f"{COMMAND_TIMEOUT} must be a positive number of seconds")
    if not 0 <= grace < math.inf:
        raise ConfigurationError(f"{STOP_GRACE} must not be negative")
    try:
        tls = client_tls(env)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from exc
    unreadable = tls.unreadable() if tls else []
    if unreadable:
        raise ConfigurationError(f"cannot read {', '.join(unreadable)} (FORGE_TLS_*)")
    return WorkerConfig(
        ledger_target=ledger_target
        or env.get(target_variable("ledger"))
        or f"127.0.0.1:{DEFAULT_PORTS['ledger']}",
        token=env[TOKEN],
        run_ids=runs,
        provider_url=env[PROVIDER_URL],
        provider_key=env[PROVIDER_KEY],
        source_dir=source,
        model=env.get(MODEL) or None,
        evidence_dir=evidence,
        granted_commands=granted_commands(env.get(GRANTED_COMMANDS, "")),
        command_timeout_seconds=timeout,
        execution_request_id=execution_request_id,
        verbose=verbose,
        all_runs=all_runs,
        source_revision=env.get(SOURCE_REVISION) or None,
        configuration_digest=env.get(CONFIGURATION_DIGEST) or None,
        source_profile=env.get(SOURCE_PROFILE) or DEFAULT_QUALIFIED_PROFILE,
        stop_grace_seconds=grace,
        tls=tls,
    )
