"""The refund example through the real `hitl` CLI: pause, decide, resume, exactly once."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.cli.conftest import REFUND, Cli

NOTE = "note=Broken! <!channel> *APPROVED* mail jane@example.com"


def run_refund(cli: Cli, amount: str = "120", *extra: str, **env: str) -> dict[str, object]:
    r = cli(
        "run",
        str(REFUND),
        "--var",
        "order_id=78291",
        "--var",
        f"amount={amount}",
        "--var",
        NOTE,
        "--json",
        *extra,
        **env,
    )
    assert r.code == 4, (r.out, r.err)
    return r.json()


def test_pause_approve_resume_exactly_once(cli: Cli, shop) -> None:  # type: ignore[no-untyped-def]
    paused = run_refund(cli)
    assert paused["status"] == "paused" and str(paused["session_id"]).startswith("ses_")
    aid = str(paused["approval_id"])
    assert paused["resume"] == f"hitl resume {aid} --approve --as <reviewer>"
    assert shop("SELECT * FROM refunds") == []  # nothing ran before the approval

    show = cli("show", aid, "--json").json()
    assert {
        "id",
        "status",
        "tool",
        "args",
        "action_hash",
        "version",
        "tier",
        "required_role",
        "quorum",
        "decisions",
        "expires_at",
    } <= set(show)
    assert (show["tool"], show["tier"], show["required_role"], show["quorum"]) == ("refund", "approve", "support", 1)
    assert show["args"]["amount"] == 120 and "[email]" in show["evidence"] and "jane@" not in show["evidence"]

    stranger = cli("resume", aid, "--approve", "--as", "U_STRANGER", "--json")
    assert stranger.code == 1 and stranger.json()["error"]["code"] == "not_eligible"
    own = cli("resume", aid, "--approve", "--as", "agent:riley", "--json")
    assert own.code == 1 and own.json()["error"]["code"] == "self_approval"
    assert cli("show", aid, "--json").json()["version"] == 1

    done = cli("resume", aid, "--approve", "--as", "U_SUPPORT1", "--json")
    assert done.code == 0, done.out
    body = done.json()
    assert body["status"] == "completed" and body["outputs"]["refund"]["amount"] == 120
    assert shop("SELECT order_id, amount FROM refunds") == [("78291", 120.0)]
    assert len(shop("SELECT * FROM emails")) == 1

    again = cli("resume", aid, "--approve", "--as", "U_SUPPORT2", "--json")
    assert again.code == 1 and again.json()["error"]["code"] == "already_decided"
    replay = cli("resume", str(paused["session_id"]), "--json")
    assert replay.code == 0 and replay.json()["status"] == "completed"
    assert len(shop("SELECT * FROM refunds")) == 1 and len(shop("SELECT * FROM emails")) == 1

    audit = cli("audit", aid, "--json").json()["audit"]
    assert [e["event"] for e in audit] == [
        "consequence",  # computed before anyone was asked (the example's consequence)
        "created",
        "refused",
        "refused",
        "decided",
        "consequence",  # and again just before it ran (its consequence_check): unchanged, so it ran
        "executing",
        "executed",
        "refused",
    ]


def test_large_refund_needs_two_distinct_finance_approvers(cli: Cli, shop) -> None:  # type: ignore[no-untyped-def]
    paused = run_refund(cli, "899")
    aid = str(paused["approval_id"])
    assert paused["approval"]["tier"] == "escalate" and paused["approval"]["quorum"] == 2  # type: ignore[index]
    assert cli("resume", aid, "--approve", "--as", "U_SUPPORT1").code == 1
    one = cli("resume", aid, "--approve", "--as", "U_FIN1", "--json")
    assert one.code == 4 and "1 of 2" in one.json()["reason"]
    twice = cli("resume", aid, "--approve", "--as", "U_FIN1", "--json")
    assert twice.code == 1 and twice.json()["error"]["code"] == "duplicate_vote"
    assert shop("SELECT * FROM refunds") == []
    two = cli("resume", aid, "--approve", "--as", "U_FIN2", "--json")
    assert two.code == 0 and shop("SELECT amount FROM refunds") == [(899.0,)]


def test_reject_stops_with_exit_3(cli: Cli, shop) -> None:  # type: ignore[no-untyped-def]
    aid = str(run_refund(cli)["approval_id"])
    r = cli("resume", aid, "--reject", "--reason", "duplicate claim", "--as", "U_SUPPORT2", "--json")
    assert r.code == 3 and r.json()["status"] == "rejected" and r.json()["reason"] == "duplicate claim"
    assert shop("SELECT * FROM refunds") == [] and shop("SELECT * FROM emails") == []


def test_modify_validates_and_reruns_policy(cli: Cli, shop) -> None:  # type: ignore[no-untyped-def]
    aid = str(run_refund(cli)["approval_id"])
    base = {"order_id": "78291", "customer_id": "C-1042", "reason": "partial"}
    bad = cli("resume", aid, "--modify", "--args", json.dumps({**base, "amount": -5}), "--as", "U_SUPPORT1", "--json")
    assert bad.code == 1 and "amount" in bad.json()["error"]["message"]
    assert cli("show", aid, "--json").json()["version"] == 1
    # The edit's decider saw the 50's consequence (computed at the Modify), which the check before it runs
    # (consequence_check) finds unchanged: it runs at once.
    ok = cli("resume", aid, "--modify", "--args", json.dumps({**base, "amount": 50}), "--as", "U_SUPPORT1", "--json")
    assert ok.code == 0 and shop("SELECT amount, reason FROM refunds") == [(50.0, "partial")]

    aid2 = str(run_refund(cli, "60", "--session", "ses_second")["approval_id"])
    up = cli("resume", aid2, "--modify", "--args", json.dumps({**base, "amount": 700}), "--as", "U_SUPPORT1", "--json")
    assert up.code == 4, up.out
    new = up.json()["approval"]
    assert new["id"] != aid2 and new["tier"] == "escalate" and new["required_role"] == "finance"
    assert cli("show", aid2, "--json").json()["status"] == "superseded"
    cli("resume", new["id"], "--approve", "--as", "U_FIN1")
    fin = cli("resume", new["id"], "--approve", "--as", "U_FIN3", "--json")
    assert fin.code == 0 and shop("SELECT amount FROM refunds ORDER BY refund_id") == [(50.0,), (700.0,)]


def test_changed_workflow_is_refused_unless_forced(cli: Cli, tmp_path: Path, shop) -> None:  # type: ignore[no-untyped-def]
    wf_dir = tmp_path / "wf"
    wf_dir.mkdir()
    for name in ("workflow.yaml", "hitl.yaml", "tools.py"):
        (wf_dir / name).write_text((REFUND.parent / name).read_text())
    wf = wf_dir / "workflow.yaml"
    r = cli("run", str(wf), "--var", "order_id=78291", "--var", "amount=20", "--json")
    aid = r.json()["approval_id"]
    wf.write_text(wf.read_text().replace("Your refund for order", "About your order"))
    refused = cli("resume", aid, "--approve", "--as", "U_SUPPORT1", "--json")
    assert refused.code == 1 and refused.json()["error"]["code"] == "workflow_changed"
    assert "changed: notify" in refused.json()["error"]["message"]
    assert cli("show", aid, "--json").json()["status"] == "pending"  # refused before deciding
    forced = cli("resume", aid, "--approve", "--as", "U_SUPPORT1", "--force", "--json")
    assert forced.code == 0
    assert any(e["event"] == "forced_resume" for e in cli("audit", "--json").json()["audit"])


def test_bad_input_is_one_line_and_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    missing = cli("run", str(REFUND), "--var", "order_id=1")
    assert missing.code == 2 and "missing variable(s) amount" in missing.err and "Traceback" not in missing.err
    unknown = cli("run", str(REFUND), "--var", "order_id=1", "--var", "amount=1", "--var", "colour=red")
    assert unknown.code == 2 and "unknown variable(s) colour" in unknown.err
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsteps:\n  - id: a\n    tool: nope\n")
    r = cli("run", str(bad))
    assert r.code == 1 and "unknown tool 'nope'" in r.err and "bad.yaml:4" in r.err  # the `tool:` line
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nsteps: [\n")
    assert "not valid YAML" in cli("run", str(broken)).err
    assert cli("resume", "apr_NOSUCH", "--approve", "--as", "U_SUPPORT1").code == 1
    assert cli("resume", "apr_X", "--approve", "--reject").code == 2
    assert cli("resume", "apr_X", "--modify").code == 2
    no_reviewer = cli("resume", "apr_NOSUCH", "--approve")
    assert no_reviewer.code == 1
    assert cli("pending", "--json").json()["count"] == 0


def test_auto_approve_is_loud_audited_and_refuses_escalations(cli: Cli, shop) -> None:  # type: ignore[no-untyped-def]
    r = cli("run", str(REFUND), "--var", "order_id=78291", "--var", "amount=30", "--auto-approve", "--json")
    assert r.code == 0 and "AUTO-APPROVING" in r.err
    assert any(e["event"] == "auto_approve" for e in cli("audit", "--json").json()["audit"])
    esc = cli(
        "run",
        str(REFUND),
        "--var",
        "order_id=78291",
        "--var",
        "amount=600",
        "--var",
        "note=x",
        "--auto-approve",
        "--json",
    )
    assert esc.code == 4 and "--auto-approve-escalations" in esc.err
    wide = cli(
        "run",
        str(REFUND),
        "--var",
        "order_id=78291",
        "--var",
        "amount=700",
        "--auto-approve",
        "--auto-approve-escalations",
        "--json",
    )
    assert wide.code == 0, wide.err


def test_pending_show_policy_and_expiry(cli: Cli, shop) -> None:  # type: ignore[no-untyped-def]
    t0 = "1800000000"
    r = cli("run", str(REFUND), "--var", "order_id=78291", "--var", "amount=40", "--json", HITL_NOW=t0)
    aid = r.json()["approval_id"]
    cfg = str(REFUND.parent / "hitl.yaml")
    assert [a["id"] for a in cli("pending", "--json", "--as", "U_SUPPORT1", HITL_CONFIG=cfg).json()["pending"]] == [aid]
    assert cli("pending", "--json", "--as", "U_FIN1", HITL_CONFIG=cfg).json()["pending"] == []
    assert cli("pending", "--json", "--as", "agent:riley", HITL_CONFIG=cfg).json()["pending"] == []
    assert "no hitl.yaml found" in cli("pending", "--as", "U_SUPPORT1").err
    human = cli("pending", "--as", "U_SUPPORT1", "--config", cfg)
    assert aid in human.out
    explain = cli(
        "policy",
        "explain",
        "refund",
        "--args",
        '{"amount": 900, "customer_id": "C-9"}',
        "--json",
        "--config",
        str(REFUND.parent / "hitl.yaml"),
    ).json()
    assert explain["tier"] == "escalate" and explain["quorum"] == 2
    assert cli("expire", "--json", HITL_NOW=str(1800000000 + 3600)).json()["expired"] == []
    out = cli("expire", "--json", HITL_NOW=str(1800000000 + 5 * 3600)).json()["expired"]
    assert out == [{"approval_id": aid, "session_id": r.json()["session_id"], "status": "expired"}]
    shown = cli("show", aid, "--json").json()
    assert shown["status"] == "expired" and shown["decisions"] == []  # expiry is not a human rejection
    late = cli("resume", aid, "--approve", "--as", "U_SUPPORT1", "--json")
    assert late.code == 1 and late.json()["error"]["code"] == "expired"
    assert shop("SELECT * FROM refunds") == []


def test_resume_takes_new_variable_values_for_the_steps_still_to_come(cli: Cli, shop) -> None:  # type: ignore[no-untyped-def]
    paused = run_refund(cli)
    session, aid = str(paused["session_id"]), str(paused["approval_id"])
    bad = cli("resume", session, "--var", "nope=1", "--json")
    assert bad.code == 2 and "nope" in bad.json()["error"]["message"]
    # The waiting approval stays bound to what it shows (amount 120); later steps read the new reason.
    still = cli("resume", session, "--var", "reason=goodwill gesture", "--json")
    assert still.code == 4 and still.json()["approval_id"] == aid
    done = cli("resume", aid, "--approve", "--as", "U_SUPPORT1", "--var", "amount=999", "--json")
    assert done.code == 0, done.out
    assert shop("SELECT amount FROM refunds") == [(120.0,)]  # what was approved, not the new amount
    decided = cli("show", aid, "--json").json()["decisions"][0]
    assert decided["via"] == "cli-local"  # straight against the store: audited as such
    trail = cli("audit", "--json").json()["audit"]
    changed = [e["detail"] for e in trail if e["event"] == "run_vars_changed"]
    assert changed == [f"{session}: by cli: reason", f"{session}: by U_SUPPORT1: amount"], changed


def test_the_cli_reads_as_a_typer_tool_should(cli: Cli) -> None:
    paused = run_refund(cli)
    listed = cli("pending", COLUMNS="80")
    assert listed.code == 0 and str(paused["approval_id"]) in listed.out  # whole, copyable at 80 columns
    assert "no hitl.yaml found" in listed.err  # said loudly, not answered as if the policy were empty
    explained = cli("policy", "explain", "refund", "--args", '{"amount": 5}', COLUMNS="80")
    assert explained.code == 0 and "no hitl.yaml found" in explained.err
    version = cli("--version")
    assert version.code == 0 and version.out.startswith("hitl ")
    helped = cli("resume", "--help", COLUMNS="120")
    assert "[env var: HITL_STORE]" in helped.out and "Approve the action as it is." in helped.out
    assert "Exit codes: 0 completed" in cli("--help", COLUMNS="120").out
    assert "[ID|verify|head|show] [ID]" in cli("audit", "--help", COLUMNS="120").out


def test_help_groups_the_commands_and_each_reads_as_one_sentence(cli: Cli) -> None:
    """`hitl --help` lists the commands in four panels, in the order of a day's work, and each command's summary is
    one sentence (the details come in its own --help), so no line of the list breaks mid-sentence."""
    import typer.main

    from hitl.cli import app

    text = cli("--help", COLUMNS="80").out
    panels = ["Run workflows", "Review and decide", "Serve and set up", "Oversight"]
    assert [text.index(p) for p in panels] == sorted(text.index(p) for p in panels)
    group = typer.main.get_group(app)
    for name, command in group.commands.items():
        summary = (command.help or "").split("\n\n", 1)[0]
        assert "\n" not in summary.strip() or name in ("token", "policy", "sessions"), (name, summary)


def test_init_writes_a_starter_that_runs_pauses_and_resumes(cli: Cli, tmp_path: Path) -> None:
    made = cli("init", str(tmp_path / "start"))
    assert made.code == 0, made.err
    again = cli("init", str(tmp_path / "start"))
    assert again.code == 1 and "--force" in again.err  # never overwrites silently
    workflow = str(tmp_path / "start" / "workflow.yaml")
    paused = cli("run", workflow, "--var", "to=acme", "--var", "amount=120", "--json")
    assert paused.code == 4, paused.err
    body = paused.json()
    assert body["approval"]["tool"] == "send_payment" and body["approval"]["required_role"] == "approvers"
    done = cli("resume", str(body["approval_id"]), "--approve", "--as", "U_YOU", "--json")
    assert done.code == 0, done.out
    assert len((tmp_path / "payments.log").read_text().splitlines()) == 1  # the cli fixture runs in tmp_path
    # The next steps it printed run as printed from where it was typed, and its large-payment rule can be met.
    assert f"hitl run {tmp_path / 'start' / 'workflow.yaml'} --var to=acme" in " ".join(made.out.split())
    assert cli("validate", workflow, "--json", HITL_CONFIG="").json()["valid"] is True
    big = cli("run", workflow, "--var", "to=acme", "--var", "amount=5000", "--json").json()
    for who in ("U_YOU", "U_TEAMMATE"):
        last = cli("resume", str(big["approval_id"]), "--approve", "--as", who, "--json")
    assert last.code == 0, last.out


def test_init_writes_the_refund_example_whose_printed_steps_run_as_printed(cli: Cli, tmp_path: Path, shop) -> None:  # type: ignore[no-untyped-def]
    """pip first: from a wheel there is no checkout to copy the example from; `hitl init --example refund` writes
    it, and the next steps it prints run as printed from where it was typed."""
    made = cli("init", "--example", "refund", str(tmp_path / "refund"))
    assert made.code == 0, made.err
    assert (tmp_path / "refund" / "shop_consequences.py").is_file()  # the consequence its hitl.yaml shows how to use
    printed = " ".join(made.out.split())
    run = printed.split("next: ", 1)[1].split(" (it pauses", 1)[0].split()
    assert run[:2] == ["hitl", "run"] and run[2] == str(tmp_path / "refund" / "workflow.yaml")
    paused = cli(*run[1:], "--json")
    assert paused.code == 4, paused.err
    body = paused.json()
    assert body["approval"]["tool"] == "refund"
    then = printed.split("then: ", 1)[1].split()  # the command on the line after "then:"
    assert then[2:4] == ["<approval", "id>"]
    done = cli(then[1], str(body["approval_id"]), *then[4:], "--json")
    assert done.code == 0 and done.json()["status"] == "completed", done.out
    assert shop("SELECT order_id, amount FROM refunds") == [("78291", 120.0)]
    assert cli("init", "--example", "nope", str(tmp_path / "x")).code == 2


def test_validate_and_explain_warn_of_a_quorum_no_role_can_meet(cli: Cli, tmp_path: Path) -> None:
    cli("init", str(tmp_path / "solo"))
    config = tmp_path / "solo" / "hitl.yaml"
    config.write_text(config.read_text().replace("[U_YOU, U_TEAMMATE]", "[U_YOU]"))
    out = cli("validate", str(tmp_path / "solo" / "workflow.yaml"), "--json", HITL_CONFIG="")
    problems = out.json()["problems"]
    assert out.code == 2 and [p["field"] for p in problems] == ["policy.rules.0.quorum"], problems
    assert "asks 2 distinct approvers but role 'approvers' has 1" in problems[0]["message"]
    explained = cli("policy", "explain", "send_payment", "--args", '{"to": "x", "amount": 5}', HITL_CONFIG=str(config))
    assert "can never be approved" in explained.err


def test_stats_reads_the_hitl_metrics_from_the_store(cli: Cli) -> None:
    now = 1_900_000_000
    paused = run_refund(cli, "120", HITL_NOW=str(now))
    cli("resume", str(paused["approval_id"]), "--approve", "--as", "U_SUPPORT1", "--json", HITL_NOW=str(now + 600))
    second = run_refund(cli, "130", "--session", "ses_second", HITL_NOW=str(now + 700))
    rejected = cli(
        "resume",
        str(second["approval_id"]),
        "--reject",
        "--reason",
        "dup",
        "--as",
        "U_SUPPORT2",
        "--json",
        HITL_NOW=str(now + 760),
    )
    assert rejected.code == 3
    shown = cli("stats", "--since", "1d", "--json", HITL_NOW=str(now + 800)).json()
    rows = {(r["tool"], r["tier"]): r for r in shown["rows"]}
    assert rows[("look_up_order", "auto")]["autonomous"] == 2  # every process's counts, written when it closed
    assert rows[("check_refund", "auto")]["autonomous"] == 2
    refund = rows[("refund", "approve")]
    assert (refund["asked"], refund["approved"], refund["rejected"]) == (2, 1, 1)
    assert refund["autonomous_completion_rate"] == 0.0 and refund["correction_rate"] == 0.5
    latency = refund["intervention_latency"]
    assert latency["count"] == 2 and latency["sum_seconds"] == 660.0 and latency["p90_seconds_at_most"] == 900
    assert shown["all"]["actions"] == 7  # two lookups, two checks of what is left, two refunds, one e-mail
    bands = {b["tier"]: b for b in shown["bands"]}  # per rank band: the most important first
    assert [b["tier"] for b in shown["bands"]][:2] == ["approve", "auto"] and "escalate" not in bands
    assert bands["approve"]["intervention_latency"]["count"] == 2
    assert bands["approve"]["first_interaction"]["count"] == 0  # the CLI is no look at a card: Slack's are counted
    people = cli("stats", HITL_NOW=str(now + 800), COLUMNS="80")
    assert people.code == 0 and "refund" in people.out and "intervention latency" in people.out
    assert "approve band first interaction p50" in people.out
    assert cli("stats", "--since", "soon").code == 2


def test_modify_is_an_edit_and_every_surface_shows_what_changed(cli: Cli, shop) -> None:  # type: ignore[no-untyped-def]
    """A field left out of an edit keeps its value (the run's reason stays "customer request"); the CLI's result,
    the superseded and the replacing approvals, and the audit say what changed, before -> after."""
    aid = str(run_refund(cli)["approval_id"])
    before = cli("show", aid, "--json").json()["args"]
    assert before["reason"] == "customer request"
    edit = cli("resume", aid, "--modify", "--set", "amount=80", "--as", "U_SUPPORT1", "--json")
    assert edit.code == 0, edit.out  # its consequence_check finds the 80's consequence, the one its decider saw
    assert "changed by U_SUPPORT1: amount: 120 -> 80" in edit.json()["history"]
    shown = cli("show", aid, "--json").json()
    assert shown["execute_args"] == {**before, "amount": 80}  # everything else kept, not reset to defaults
    assert shown["changes"] == {"amount": {"before": 120, "after": 80}}
    assert shop("SELECT amount, reason FROM refunds") == [(80.0, "customer request")]
    trail = cli("audit", aid, "--json").out
    assert "amount: 120 -> 80" in trail

    # An edit that needs other approvers: the superseded approval and its replacement both say what changed.
    aid2 = str(run_refund(cli, "60", "--session", "ses_second")["approval_id"])
    up = cli("resume", aid2, "--modify", "--args", '{"amount": 700}', "--as", "U_SUPPORT1", "--json")
    assert up.code == 4, up.out
    replacement = up.json()["approval"]
    assert replacement["changes"] == {"amount": {"before": 60, "after": 700}}
    assert replacement["execute_args"]["reason"] == "customer request"
    assert cli("show", aid2, "--json").json()["changes"] == {"amount": {"before": 60, "after": 700}}

    # --replace: the edit is the whole arguments (a missing required field is refused, nothing changes).
    aid3 = str(run_refund(cli, "30", "--session", "ses_third")["approval_id"])
    whole = cli("resume", aid3, "--modify", "--replace", "--args", '{"amount": 20}', "--as", "U_SUPPORT1", "--json")
    assert whole.code == 1 and "order_id" in whole.json()["error"]["message"]
    assert cli("show", aid3, "--json").json()["version"] == 1


def test_every_listing_and_help_fits_80_columns_whole(cli: Cli) -> None:
    """At 80 columns (a small terminal, or a pipe) nothing is cut: ids and times come whole, tables that would not
    fit turn into blocks, no line runs past the edge, no flag shows a `<bool>` type and help paragraphs flow."""
    import typer.main

    from hitl.cli import app

    paused = run_refund(cli)
    aid = str(paused["approval_id"])
    expires = cli("show", aid, "--json").json()["expires_at"]
    shown = {
        "pending": cli("pending", COLUMNS="80").out,
        "audit": cli("audit", COLUMNS="80").out,
        "stats": cli("stats", COLUMNS="80").out,
        "sessions": cli("sessions", "list", COLUMNS="80").out,
    }
    # Issue 63: pending says the time left (once), not the expiry time; `hitl show` keeps the time itself.
    assert aid in shown["pending"] and "3 h left" in shown["pending"], shown["pending"]
    assert expires in cli("show", aid, COLUMNS="80").out
    assert aid in shown["audit"] and str(paused["session_id"]) in shown["sessions"]
    again = cli("resume", str(paused["session_id"]), COLUMNS="80")  # the run's own hitl.yaml names who decides
    assert again.code == 4 and "who decides:    U_SUPPORT1" in again.out and "(role support)" in again.out, again.out
    for name, text in shown.items():
        assert "…" not in text and "..." not in text, (name, text)
        assert max(map(len, text.splitlines())) <= 80, (name, text)
    listed = cli("pending", COLUMNS="200").out.splitlines()  # issue 63: a compact list at any width, not a table
    assert listed[0] == "1 pending approval · the most important first" and len(listed) == 4, listed

    def every(group: object, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        found = [path]
        for name, command in getattr(group, "commands", {}).items():
            found += every(command, (*path, name))
        return found

    for path in every(typer.main.get_group(app)):
        text = cli(*path, "--help", COLUMNS="80").out
        assert "<bool>" not in text and max(map(len, text.splitlines())) <= 80, (path, text)
    wide = cli("audit", "--help", COLUMNS="250").out  # a paragraph is one line when the terminal can hold it
    assert any("that no chain lost its newest entries (exit 0 intact, 1 broken" in line for line in wide.splitlines())


def test_a_refund_over_what_is_left_is_refused_before_anyone_is_asked(cli: Cli, shop, env) -> None:  # type: ignore[no-untyped-def]
    over = cli("run", str(REFUND), "--var", "order_id=78292", "--var", "amount=60", "--json")  # the order is 49
    assert over.code == 1, over.out
    assert (
        "refund 60.00 is more than is left to refund on order 78292 (49.00); nobody was asked" in over.json()["reason"]
    )
    with sqlite3.connect(env["HITL_STORE"].removeprefix("sqlite:///")) as db:
        assert db.execute("SELECT COUNT(*) FROM approvals").fetchone()[0] == 0  # no card, no reviewer asked
    assert shop("SELECT * FROM refunds") == []

    # Within what is left, the reviewer sees what is left beside the amount, in the order's currency.
    paused = run_refund(cli, "120")
    view = cli("show", str(paused["approval_id"]), "--json").json()["view"]
    [left] = [f for f in view["fields"] if f["name"] == "refundable"]
    assert (left["label"], left["text"], left["currency"]) == ("Left to refund", "1299", "USD")


def test_pending_lists_the_most_important_first_and_says_why(cli: Cli, shop) -> None:  # type: ignore[no-untyped-def]
    cfg = str(REFUND.parent / "hitl.yaml")
    over = str(run_refund(cli, "600", "--session", "ses_over", HITL_NOW="1800000000")["approval_id"])
    far = str(run_refund(cli, "1250", "--session", "ses_far", HITL_NOW="1800000001")["approval_id"])
    # 40 more for the same customer within a day: 1,890 over the split_refunds threshold of 500, escalated too.
    split = str(run_refund(cli, "40", "--session", "ses_split", HITL_NOW="1800000002")["approval_id"])
    listed = cli("pending", "--json", "--as", "U_FIN1", HITL_CONFIG=cfg, HITL_NOW="1800000100").json()
    assert [a["id"] for a in listed["pending"]] == [split, far, over] and listed["waiting"] == 3
    assert [a["ranked"] for a in listed["pending"]] == [
        "escalated · 3.8× its rule's limit · 3 h left",
        "escalated · 2.5× its rule's limit · 3 h left",
        "escalated · 1.2× its rule's limit · 3 h left",
    ]
    aged = cli("pending", "--json", "--as", "U_FIN1", "--order", "age", HITL_CONFIG=cfg).json()
    assert [a["id"] for a in aged["pending"]] == [over, far, split] and aged["pending"][0]["ranked"] is None
    human = cli("pending", "--as", "U_FIN1", "--config", cfg, COLUMNS="200")
    assert human.out.startswith("3 approvals wait on you") and "2.5× its rule's limit" in human.out
    assert human.out.index(split) < human.out.index(far) < human.out.index(over)
    assert cli("pending", "--json", "--as", "U_SUPPORT1", HITL_CONFIG=cfg).json()["waiting"] == 0  # all finance's
    assert cli("pending", "--order", "newest").code == 2  # not an order: a usage error, nothing listed
