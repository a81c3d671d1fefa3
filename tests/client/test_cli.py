"""The operator CLI, in-process through ``main(argv)`` and once as a real ``python -m`` process,
against the real ledger process on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from sqlalchemy import Engine, text

from services.client.cli._command import flag
from services.client.cli.render import error_lines
from shared.continuity.recovery import workflow
from shared.runtime.errors import bare_status_error
from tests.client.conftest import CliRunner, lines, seed
from tests.support import Served, as_database_owner

ROOT = Path(__file__).resolve().parents[2]


def value_column(output: str) -> set[int]:
    """The column every ``key: value`` line's value starts at."""
    columns = set()
    for line in lines(output):
        key, _, rest = line.partition(":")
        columns.add(len(line) - len(rest.lstrip()))
        assert key and rest.strip(), line
    return columns


# --- policy ------------------------------------------------------------------------------------


def test_policy_show_is_aligned_key_value_lines(cli: CliRunner, ledger_served: Served) -> None:
    result = cli("policy", "show", ledger=ledger_served.target)
    assert (result.code, result.err) == (0, "")
    shown = {
        key: rest.strip() for key, _, rest in (line.partition(":") for line in lines(result.out))
    }
    assert shown["revision"] == "1"
    assert shown["enabled"] == "false"
    assert shown["updated_by"] == "system"
    assert shown["digest"].startswith("sha256:")
    assert len(value_column(result.out)) == 1


def test_policy_set_then_show_a_revision_and_history(cli: CliRunner, ledger_served: Served) -> None:
    target = ledger_served.target
    result = cli(
        "policy",
        "set",
        "--expected-revision",
        "1",
        "--enable",
        "--window-seconds",
        "3600",
        "--per-run-ticket-limit",
        "20",
        "--allow-readonly-observation-recovery",
        token="admin-token",
        ledger=target,
    )
    assert (result.code, result.err) == (0, "")
    assert "revision:" in result.out and " 2\n" in result.out
    assert any(line.split() == ["per_run_ticket_limit:", "20"] for line in lines(result.out))
    assert any(
        line.split() == ["allow_readonly_observation_recovery:", "true"]
        for line in lines(result.out)
    )

    disabled = cli(
        "policy",
        "set",
        "--expected-revision",
        "2",
        "--disable",
        "--window-seconds",
        "600",
        token="admin-token",
        ledger=target,
    )
    assert disabled.code == 0
    assert any(line.split() == ["enabled:", "false"] for line in lines(disabled.out))

    old = cli("policy", "show", "--revision", "2", ledger=target)
    assert any(line.split() == ["window_seconds:", "3600"] for line in lines(old.out))

    history = cli("policy", "history", ledger=target)
    assert history.code == 0
    header, *rows = lines(history.out)
    assert header.split()[:3] == ["REVISION", "ENABLED", "WINDOW"]
    assert [row.split()[:3] for row in rows] == [
        ["3", "false", "600"],
        ["2", "true", "3600"],
        ["1", "false", "0"],
    ]
    assert "readonly_observation_recovery" in rows[1]
    assert "alice-admin" in rows[0] and "system" in rows[2]


def test_a_refusal_prints_code_reason_message_and_details(
    cli: CliRunner, ledger_served: Served
) -> None:
    args = ("policy", "set", "--expected-revision", "1", "--enable", "--window-seconds", "60")
    denied = cli(*args, token="reader-token", ledger=ledger_served.target)
    assert denied.code == 1
    assert denied.out == ""
    assert denied.err.startswith("error: PERMISSION_DENIED ROLE_REQUIRED: ")

    written = cli(*args, token="admin-token", ledger=ledger_served.target)
    assert written.code == 0
    assert lines(written.out)[0] == "written, revision 2"
    stale = cli(*args, token="admin-token", ledger=ledger_served.target)
    assert stale.code == 1
    assert stale.err.startswith("error: ABORTED POLICY_REVISION_STALE: ")
    assert "precondition violations:" in stale.err
    assert "POLICY_REVISION policy: current revision is 2" in stale.err
    assert any(line.split() == ["current_revision:", "2"] for line in lines(stale.err))

    invalid = cli(
        "policy",
        "set",
        "--expected-revision",
        "2",
        "--enable",
        "--window-seconds",
        "9000",
        token="admin-token",
        ledger=ledger_served.target,
    )
    assert invalid.code == 1
    assert invalid.err.startswith("error: INVALID_ARGUMENT ")
    assert "field violations:" in invalid.err and "settings.window_seconds" in invalid.err


def test_json_output_is_parsable_protobuf_json_with_defaults(
    cli: CliRunner, ledger_served: Served
) -> None:
    shown = cli("--json", "policy", "show", ledger=ledger_served.target)
    assert shown.code == 0
    # Wrapped in the response message, as the HTTP gateway answers and grpcurl prints it.
    policy = json.loads(shown.out)["policy"]
    assert policy["revision"] == "1"  # proto3 JSON: int64 as a string
    assert policy["enabled"] is False  # defaults are printed, with proto field names
    assert policy["allow_pre_admission_recovery"] is False
    assert policy["per_run_ticket_limit"] == "50"

    # Connection options and --json may also follow the command.
    history = cli("policy", "history", "--json", ledger=ledger_served.target)
    assert [p["revision"] for p in json.loads(history.out)["policies"]] == ["1"]

    refused = cli(
        "policy",
        "set",
        "--expected-revision",
        "7",
        "--enable",
        "--window-seconds",
        "60",
        "--json",
        token="admin-token",
        ledger=ledger_served.target,
    )
    assert (refused.code, refused.out) == (1, "")
    error = json.loads(refused.err)["error"]
    assert error["code"] == "ABORTED"
    assert error["reason"] == "POLICY_REVISION_STALE"
    assert error["metadata"] == {"current_revision": "1", "expected_revision": "7"}
    assert error["precondition_violations"] == [
        {"type": "POLICY_REVISION", "subject": "policy", "description": "current revision is 1"}
    ]
    assert error["field_violations"] == []


# --- journal and commands ----------------------------------------------------------------------


def test_journal_show_prints_one_line_per_entry(cli: CliRunner, ledger_served: Served) -> None:
    seeded = seed(ledger_served)
    result = cli("journal", "show", "run-1", ledger=ledger_served.target)
    assert (result.code, result.err) == (0, "")
    header, *rows = lines(result.out)
    assert header.split() == ["SEQ", "KIND", "ACTOR", "HASH"]
    assert len(rows) == len(seeded.entries)
    for row, entry in zip(rows, seeded.entries, strict=True):
        sequence, _kind, actor, short = row.split()
        assert int(sequence) == entry.sequence
        assert actor == "paul-writer"
        assert entry.hash.startswith(short) and len(short) == len("sha256:") + 12
    assert rows[0].split()[1] == "RUN_STARTED"
    assert rows[1].split()[1] == "COMMAND_EXECUTED"
    assert rows[-1].split()[1] == "RUN_HELD"
    assert len({row.index(row.split()[1]) for row in rows}) == 1  # kinds in one column

    tail = cli("journal", "show", "run-1", "--from", "12", ledger=ledger_served.target)
    assert [int(row.split()[0]) for row in lines(tail.out)[1:]] == list(
        range(12, len(seeded.entries) + 1)
    )

    as_json = cli("--json", "journal", "show", "run-1", ledger=ledger_served.target)
    document = json.loads(as_json.out)
    assert set(document) == {"entries"}
    assert [e["hash"] for e in document["entries"]] == [e.hash for e in seeded.entries]
    assert document["entries"][0]["kind"] == "JOURNAL_ENTRY_KIND_RUN_STARTED"


def test_journal_verify_and_a_broken_chain(
    cli: CliRunner, ledger_served: Served, engine: Engine
) -> None:
    seeded = seed(ledger_served)
    verified = cli("journal", "verify", "run-1", ledger=ledger_served.target)
    assert verified.code == 0
    assert any(line.split() == ["valid:", "true"] for line in lines(verified.out))
    assert any(
        line.split() == ["entries_checked:", str(len(seeded.entries))]
        for line in lines(verified.out)
    )
    assert any(line.split() == ["head_hash:", seeded.head_hash] for line in lines(verified.out))

    with as_database_owner(engine) as connection:
        connection.execute(
            text(
                "UPDATE journal_entries SET actor = 'mallory' "
                "WHERE run_id = 'run-1' AND sequence = 4"
            )
        )
    broken = cli("journal", "verify", "run-1", ledger=ledger_served.target)
    assert broken.code == 1
    assert any(line.split() == ["valid:", "false"] for line in lines(broken.out))
    assert any(line.split() == ["first_broken_sequence:", "4"] for line in lines(broken.out))
    as_json = cli("journal", "verify", "run-1", "--json", ledger=ledger_served.target)
    assert as_json.code == 1
    assert json.loads(as_json.out)["first_broken_sequence"] == "4"


def test_commands_shows_usage_of_limit(cli: CliRunner, ledger_served: Served) -> None:
    seed(ledger_served)
    result = cli("commands", "run-1", ledger=ledger_served.target)
    assert result.code == 0
    assert [line.split() for line in lines(result.out)] == [
        ["used:", "11"],
        ["limit:", "22"],
        ["remaining:", "11"],
    ]
    as_json = json.loads(cli("--json", "commands", "run-1", ledger=ledger_served.target).out)
    assert as_json == {"usage": {"used": "11", "limit": "22"}}
    missing = cli("journal", "show", "no-such-run", ledger=ledger_served.target)
    assert missing.code == 1
    assert missing.err.startswith("error: NOT_FOUND RUN_NOT_FOUND: ")
    assert any(line.split() == ["run_id:", "no-such-run"] for line in lines(missing.err))


# --- usage errors and local refusals (no server) ----------------------------------------------

SUBMIT = ("request", "submit", "run-1", "req-1", "--valid-for-seconds", "1800")
ACKS = (
    "--acknowledge-no-new-grant",
    "--acknowledge-original-consumption",
    "--acknowledge-renewed-same-attempt-lease",
)
DIGEST_FLAGS = (
    "--candidate-digest",
    "sha256:" + "a" * 64,
    "--run-digest",
    "sha256:" + "b" * 64,
    "--journal-digest",
    "sha256:" + "c" * 64,
    "--policy-digest",
    "sha256:" + "d" * 64,
)


@pytest.mark.parametrize(
    "argv",
    [
        (),
        ("policy",),
        ("policy", "set", "--expected-revision", "1", "--window-seconds", "60"),
        ("policy", "set", "--expected-revision", "1", "--enable", "--disable"),
        ("policy", "show", "--revision", "latest"),
        ("journal", "show"),
        ("request", "submit", "run-1", "req-1", *ACKS, "--from-candidate"),
        (*SUBMIT, *ACKS),
        (*SUBMIT, *ACKS, "--candidate-digest", "sha256:" + "a" * 64),
        (*SUBMIT, *ACKS, "--from-candidate", *DIGEST_FLAGS),
        (*SUBMIT, *ACKS, "--from-candidate", *DIGEST_FLAGS[2:4]),
        ("nonsense",),
    ],
)
def test_usage_errors_exit_2(cli: CliRunner, argv: tuple[str, ...]) -> None:
    result = cli(*argv)
    assert result.code == 2
    assert result.out == ""
    assert result.err.startswith("usage error: ")


def test_from_candidate_needs_the_reviewed_candidate_digest(cli: CliRunner) -> None:
    """Without the candidate digest the operator reviewed, --from-candidate would submit whatever
    the candidate has become: a usage error, before any call (every address is a closed port)."""
    result = cli(*SUBMIT, *ACKS, "--from-candidate", token="operator-token")
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith("usage error: ")
    assert "--candidate-digest" in result.err


def test_submit_help_documents_the_reviewed_candidate_digest(cli: CliRunner) -> None:
    result = cli("request", "submit", "--help")
    assert result.code == 0
    assert "--candidate-digest" in result.out
    assert "reviewed" in result.out


def test_a_missing_token_is_a_usage_error(cli: CliRunner) -> None:
    result = cli("policy", "show", token=None)
    assert result.code == 2
    assert "FORGE_TOKEN" in result.err
    as_json = cli("--json", "policy", "show", token=None)
    assert as_json.code == 2
    assert json.loads(as_json.err)["error"]["code"] == "USAGE"


def test_help_exits_0(cli: CliRunner) -> None:
    result = cli("request", "submit", "--help")
    assert result.code == 0
    assert "--acknowledge-no-new-grant" in result.out


@pytest.mark.parametrize(
    ("extra", "reason", "field"),
    [
        (ACKS[1:], "ACKNOWLEDGEMENT_REQUIRED", "acknowledge_no_new_grant"),
        ((*ACKS, "--version", "3"), "VERSION_UNSUPPORTED", "version"),
        (
            (*ACKS, "--version", "2"),
            "ACKNOWLEDGEMENT_REQUIRED",
            "acknowledge_unavailable_source_observations",
        ),
        (
            (*ACKS, "--acknowledge-unavailable-source-observations"),
            "FIELD_INVALID",
            "acknowledge_unavailable_source_observations",
        ),
    ],
)
@pytest.mark.parametrize("digests", [("--from-candidate", *DIGEST_FLAGS[:2]), DIGEST_FLAGS])
def test_submit_refuses_locally_before_any_call(
    cli: CliRunner,
    extra: tuple[str, ...],
    reason: str,
    field: str,
    digests: tuple[str, ...],
) -> None:
    """Every service address is a closed port; even --from-candidate reads nothing first."""
    result = cli(*SUBMIT, *extra, *digests, token="operator-token")
    assert result.code == 1
    assert result.err.startswith(f"error: INVALID_ARGUMENT {reason}: ")
    assert "origin:" in result.err
    # The refusal names the flag the operator types, not the proto field.
    assert f"    {flag(field)}: " in result.err


def test_submit_with_a_bad_window_refuses_locally_as_json(cli: CliRunner) -> None:
    result = cli(
        "request",
        "submit",
        "run-1",
        "req-1",
        "--valid-for-seconds",
        "0",
        *ACKS,
        *DIGEST_FLAGS,
        "--json",
        token="operator-token",
    )
    assert (result.code, result.out) == (1, "")
    error = json.loads(result.err)["error"]
    assert (error["code"], error["reason"]) == ("INVALID_ARGUMENT", "FIELD_INVALID")
    assert [v["field"] for v in error["field_violations"]] == ["valid_for_seconds"]
    assert [v["flag"] for v in error["field_violations"]] == ["--valid-for-seconds"]
    assert error["metadata"]["origin"] == "client"


def test_a_well_formed_submit_does_go_out(cli: CliRunner) -> None:
    """The contrast to the local refusals: the closed port answers UNAVAILABLE."""
    result = cli(*SUBMIT, *ACKS, *DIGEST_FLAGS, token="operator-token")
    assert result.code == 1
    assert result.err.startswith("error: UNAVAILABLE ")


# --- the real entry point ----------------------------------------------------------------------


def test_python_dash_m_services_client_runs(ledger_served: Served) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}:{ROOT / 'shared' / 'gen'}",
        "FORGE_TOKEN": "reader-token",
        "FORGE_LEDGER_TARGET": ledger_served.target,
    }
    done = subprocess.run(
        [sys.executable, "-m", "services.client", "--json", "policy", "show"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["policy"]["revision"] == "1"

    refused = subprocess.run(
        [
            *(sys.executable, "-m", "services.client"),
            *("policy", "set", "--expected-revision", "1", "--enable", "--window-seconds", "60"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: PERMISSION_DENIED ROLE_REQUIRED: ")

    usage = subprocess.run(
        [sys.executable, "-m", "services.client", "policy"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert usage.returncode == 2


# --- help and answers an operator can act on -----------------------------------------------------


def test_help_names_the_installed_program_and_the_defaults_as_they_are(cli: CliRunner) -> None:
    env = {"FORGE_LEDGER_TARGET": "ledger.example:7001"}
    shown = cli("--help", env=env)
    assert shown.code == 0
    assert shown.out.startswith("usage: forge-continuity ")
    assert "python -m" not in shown.out
    text = " ".join(shown.out.split())  # argparse wraps help text
    assert "(default: ledger.example:7001," in text
    assert "(default: 127.0.0.1:50053," in text and "(default: 127.0.0.1:50054," in text
    # the token's value is never printed, only whether one is set
    assert "(default: $FORGE_TOKEN, not set)" in text
    assert "secret" not in cli("--help", env={"FORGE_TOKEN": "secret"}).out


@pytest.mark.parametrize(
    "command",
    [
        ("request", "submit"),
        ("recovery", "submit"),
        ("refusal", "submit"),
        ("observation", "submit"),
    ],
)
def test_every_acknowledgement_flag_says_what_it_acknowledges(
    cli: CliRunner, command: tuple[str, ...]
) -> None:
    shown = cli(*command, "--help")
    assert shown.code == 0
    text = " ".join(shown.out.split())
    flags = sorted({word for word in text.split() if word.startswith("--acknowledge-")})
    assert flags, shown.out
    for name in flags:
        # the option's own line: "--acknowledge-x required: acknowledge that ..."
        assert f"{name.strip('[]')} required" in text, f"{name} has no help text"
    assert "the lease bounds say which won" in text or "lease bounds" in text


@pytest.mark.parametrize(
    ("group", "name"),
    [
        ("recovery", "never_claimed"),
        ("refusal", "rejected_boundary"),
        ("observation", "readonly_observation"),
    ],
)
def test_a_recovery_flag_says_what_the_descriptor_words(
    cli: CliRunner, group: str, name: str
) -> None:
    """The CLI keeps no copy of a workflow's acknowledgements: each flag's help is the sentence
    the registry's wording gives (the console's words too)."""
    shown = cli(group, "submit", "--help")
    assert shown.code == 0
    text = " ".join(shown.out.split())
    worded = workflow(name).wording.acknowledgements
    assert [field for field, _ in worded] == list(workflow(name).acknowledgements)
    for field, sentence in worded:
        # "required...: acknowledge that <the sentence, its first letter lower-cased>"
        assert f"{flag(field)} required" in text
        assert sentence.rstrip(".")[1:] in text, (field, sentence)


def test_an_unreachable_service_is_named_with_its_address_in_the_error_line(
    cli: CliRunner, closed_target: str
) -> None:
    result = cli("policy", "show", ledger=closed_target)
    assert result.code == 1
    first = result.err.splitlines()[0]
    assert first.startswith("error: UNAVAILABLE SERVICE_UNREACHABLE: ")
    assert f"ledger service at {closed_target}" in first
    assert "UNAVAILABLE UNAVAILABLE" not in result.err
    # no separate transport warning: the error line is the whole story
    assert "call failed" not in result.err and "WARNING" not in result.err
    as_json = json.loads(cli("--json", "policy", "show", ledger=closed_target).err)["error"]
    assert as_json["metadata"] == {"service": "ledger", "target": closed_target}


def test_a_bare_status_prints_its_code_once() -> None:
    error = bare_status_error(grpc.StatusCode.INTERNAL)
    assert error_lines(error)[0].startswith("error: INTERNAL: ")


def test_the_installed_console_script_runs_from_anywhere(tmp_path: Path) -> None:
    """The README's `.venv/bin/forge-continuity --help`: no activated environment needed."""
    script = ROOT / ".venv" / "bin" / "forge-continuity"
    if not script.exists():
        pytest.skip("the project's virtual environment is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = "/usr/bin:/bin"
    done = subprocess.run(
        [str(script), "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "COMMAND" in done.stdout and "policy" in done.stdout
