"""``runs list`` and ``requests list`` (ADR 0022) against a real ledger: short state names, one
page at a time with the next page's token named, JSON as the HTTP gateway answers, and a bad
filter refused with the allowed fields."""

from __future__ import annotations

import json
import re

from tests.client.conftest import ClientFactory, CliRunner, lines, seed
from tests.support import Served


def test_runs_list_pages_held_runs(cli: CliRunner, ledger_served: Served) -> None:
    for run_id in ("run-1", "run-2", "run-3"):
        seed(ledger_served, run_id)
    target = ledger_served.target
    first = cli("runs", "list", "--state", "HELD", "--page-size", "2", ledger=target)
    assert first.code == 0, first.err
    shown = lines(first.out)
    assert shown[0].split() == ["RUN", "STATE", "UPDATED", "EXECUTION", "REQUEST"]
    assert [row.split()[:2] for row in shown[1:3]] == [["run-3", "held"], ["run-2", "held"]]
    assert shown[3].startswith("next page: --page-token ")
    token = shown[3].split()[-1]
    rest = cli("runs", "list", "--state", "held", "--page-token", token, ledger=target)
    assert [row.split()[0] for row in lines(rest.out)[1:]] == ["run-1"]
    # A state no run can be in is the flag's usage error, not the server's filter refusal.
    for listing in (("runs", "list"), ("requests", "list")):
        bogus = cli(*listing, "--state", "bogus", ledger=target)
        assert bogus.code == 2, bogus.err
        assert "--state: unknown state 'bogus'" in bogus.err and "filter" not in bogus.err
    assert "held" in cli("runs", "list", "--state", "bogus", ledger=target).err
    as_json = cli("--json", "runs", "list", "--filter", "run_id = run-2", ledger=target)
    document = json.loads(as_json.out)
    assert [row["run"]["run_id"] for row in document["runs"]] == ["run-2"]
    assert document["runs"][0]["continuity_state"] == "RUN_CONTINUITY_STATE_HELD"
    assert document["next_page_token"] == ""


def test_requests_list_across_runs_and_of_one_run(cli: CliRunner, ledger_served: Served) -> None:
    seed(ledger_served, "run-1")
    target = ledger_served.target
    across = cli("requests", "list", "--state", "queued", ledger=target)
    assert across.code == 0, across.err
    assert lines(across.out) == ["no execution requests"]
    one = cli("requests", "list", "run-1", "--state", "QUEUED", ledger=target)
    assert (one.code, lines(one.out)) == (0, ["no execution requests"])
    unknown = cli("requests", "list", "run-1", "--state", "sleeping", ledger=target)
    assert unknown.code == 2 and "queued" in unknown.err
    mixed = cli("requests", "list", "run-1", "--page-size", "3", ledger=target)
    assert mixed.code == 2


def test_a_bad_filter_is_refused_naming_the_allowed_fields(
    cli: CliRunner, ledger_served: Served
) -> None:
    refused = cli("runs", "list", "--filter", "owner = me", ledger=ledger_served.target)
    assert refused.code == 1
    assert "FILTER_INVALID" in refused.err
    assert "state, held, admitted, unresolved, updated_at, run_id" in refused.err


def test_the_client_lists_runs_page_by_page(
    client_for: ClientFactory, ledger_served: Served
) -> None:
    for run_id in ("run-1", "run-2"):
        seed(ledger_served, run_id)
    client = client_for("reader-token")
    first = client.list_runs(filter_text="held = true", page_size=1)
    rest = client.list_runs(
        filter_text="held = true", page_size=1, page_token=first.next_page_token
    )
    assert [r.run.run_id for r in [*first.runs, *rest.runs]] == ["run-2", "run-1"]
    assert rest.next_page_token == ""
    queued = client.list_all_execution_requests(filter_text="state = queued")
    assert list(queued.execution_requests) == []


def test_runs_show_names_the_facts_state_ledger_newest_request_and_console_link(
    cli: CliRunner, ledger_served: Served
) -> None:
    seed(ledger_served, "run-1")
    seed(ledger_served, "run-10")  # a run whose id extends the one asked for is not it
    shown = cli("runs", "show", "run-1", ledger=ledger_served.target)
    assert shown.code == 0, shown.err
    facts = {k.strip(): v.strip() for k, v in (row.split(":", 1) for row in lines(shown.out))}
    assert facts["run"] == "run-1"
    assert facts["continuity state"] == "held"
    assert re.fullmatch(r"\d+ of \d+ commands used", facts["command ledger"])
    assert facts["newest request"] == "none"
    assert facts["console"] == "http://127.0.0.1:8080/console/runs/run-1"
    document = json.loads(cli("--json", "runs", "show", "run-1", ledger=ledger_served.target).out)
    assert document["continuity_state"] == "held" and document["run"]["run_id"] == "run-1"
    absent = cli("runs", "show", "run-nobody", ledger=ledger_served.target)
    assert absent.code == 1 and "NOT_FOUND" in absent.err
