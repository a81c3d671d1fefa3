"""The worker's configuration and owner identity, without services."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.worker.config import ConfigurationError, load
from services.worker.owner import owner_instance, process_start_ticks


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "FORGE_WORKER_TOKEN": "t",
        "FORGE_WORKER_PROVIDER_URL": "http://127.0.0.1:9/v1",
        "FORGE_WORKER_PROVIDER_KEY": "k",
        "FORGE_WORKER_SOURCE_DIR": str(tmp_path),
        **extra,
    }


def test_the_worker_refuses_to_start_without_its_settings(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="FORGE_WORKER_TOKEN, FORGE_WORKER_PROVIDER_KEY"):
        load(["run-1"], env={"FORGE_WORKER_PROVIDER_URL": "x"})
    with pytest.raises(ConfigurationError, match="name the runs"):
        load([], env=env(tmp_path))
    with pytest.raises(ConfigurationError, match="not a directory"):
        load(["run-1"], env=env(tmp_path, FORGE_WORKER_SOURCE_DIR=str(tmp_path / "missing")))
    for granted in ("make test", '["make", "test"]', "[[]]", "[[1]]"):
        with pytest.raises(ConfigurationError, match="FORGE_WORKER_GRANTED_COMMANDS"):
            load(["run-1"], env=env(tmp_path, FORGE_WORKER_GRANTED_COMMANDS=granted))


def test_seconds_settings_are_read_as_the_services_read_them(tmp_path: Path) -> None:
    """The command timeout and the stop grace go through the runtime's seconds parser: unset or
    empty keep the default, a grace of 0 is allowed, a word or a negative grace is refused
    naming its variable."""
    config = load(["run-1"], env=env(tmp_path, FORGE_WORKER_COMMAND_TIMEOUT_SECONDS=""))
    assert config.command_timeout_seconds == 300.0
    config = load(
        ["run-1"],
        env=env(
            tmp_path,
            FORGE_WORKER_COMMAND_TIMEOUT_SECONDS="12.5",
            FORGE_WORKER_STOP_GRACE_SECONDS="0",
        ),
    )
    assert (config.command_timeout_seconds, config.stop_grace_seconds) == (12.5, 0.0)
    for variable in ("FORGE_WORKER_COMMAND_TIMEOUT_SECONDS", "FORGE_WORKER_STOP_GRACE_SECONDS"):
        with pytest.raises(ConfigurationError, match=f"{variable} must be a number, not 'soon'"):
            load(["run-1"], env=env(tmp_path, **{variable: "soon"}))
    for grace in ("-1", "nan", "inf"):
        with pytest.raises(ConfigurationError, match="FORGE_WORKER_STOP_GRACE_SECONDS must not"):
            load(["run-1"], env=env(tmp_path, FORGE_WORKER_STOP_GRACE_SECONDS=grace))
    for timeout in ("0", "-5", "nan", "inf"):
        with pytest.raises(ConfigurationError, match="COMMAND_TIMEOUT_SECONDS must be a positive"):
            load(["run-1"], env=env(tmp_path, FORGE_WORKER_COMMAND_TIMEOUT_SECONDS=timeout))


def test_granted_commands_and_runs_come_from_the_environment(tmp_path: Path) -> None:
    config = load(
        [],
        env=env(
            tmp_path,
            FORGE_WORKER_RUN_IDS="run-1,run-2",
            FORGE_WORKER_GRANTED_COMMANDS='[["make", "test"], ["ruff", "check", "."]]',
            FORGE_LEDGER_TARGET="ledger:1",
        ),
    )
    assert config.run_ids == ("run-1", "run-2")
    assert config.granted_commands == {("make", "test"), ("ruff", "check", ".")}
    assert config.ledger_target == "ledger:1"
    assert config.evidence_dir is None and config.model is None


def test_tls_comes_from_the_environment_and_a_half_or_unreadable_setting_is_refused(
    tmp_path: Path,
) -> None:
    assert load(["run-1"], env=env(tmp_path)).tls is None  # plaintext
    cert, key, ca = (tmp_path / name for name in ("tls.crt", "tls.key", "ca.crt"))
    for path in (cert, key, ca):
        path.write_text("pem")
    files = {"FORGE_TLS_CA": str(ca), "FORGE_TLS_CERT": str(cert), "FORGE_TLS_KEY": str(key)}
    tls = load(["run-1"], env=env(tmp_path, **files)).tls
    assert tls is not None and (tls.ca_file, tls.cert_file, tls.key_file) == (
        str(ca),
        str(cert),
        str(key),
    )
    with pytest.raises(ConfigurationError, match="needs its key"):
        load(["run-1"], env=env(tmp_path, FORGE_TLS_CERT=str(cert)))
    with pytest.raises(ConfigurationError, match="cannot read"):
        load(["run-1"], env=env(tmp_path, FORGE_TLS_CA=str(tmp_path / "missing.crt")))


def test_the_start_time_is_read_after_a_command_name_with_spaces_and_parentheses(
    tmp_path: Path,
) -> None:
    (tmp_path / "42").mkdir()
    fields = ["S", *[str(n) for n in range(4, 22)], "987654", "0"]  # field 22 is 987654
    (tmp_path / "42" / "stat").write_text(f"42 (a (b) c) {' '.join(fields)}\n")
    assert process_start_ticks(42, tmp_path) == 987654


def test_this_process_is_the_owner_instance() -> None:
    owner = owner_instance()
    assert owner is not None
    assert owner.pid == os.getpid()
    assert owner.process_start_ticks == process_start_ticks(os.getpid())
    assert owner.host_boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
