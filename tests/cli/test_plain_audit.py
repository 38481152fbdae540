"""`hitl audit show` in plain words: "saw the card as shown at version 1 (checked)", each decision's reason (typed by
the reviewer, printed inert), the digest only under `--verbose` or `--json`; and `hitl show --config` draws an
approval in that hitl.yaml's words, as `hitl pending --config` does. The `hitl` CLI as a real process, on a real
SQLite store."""

from __future__ import annotations

from pathlib import Path

from hitl.engine.domain.models import DecisionKind
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.runtime.process import RuntimeSettings, open_runtime
from tests.api.cli_process import hitl, store_env
from tests.bot.conftest import ROOT

REFUND = ROOT / "examples" / "refund" / "workflow.yaml"
REASON = "Customer <@U_FIN2> *APPROVED* \u202eevil; checked the order by phone"
PAY = """
requester: agent:riley
roles:
  support: [U_SUPPORT1, U_SUPPORT2]
policy:
  tools:
    pay:
      tier: approve
      role: support
      schema:
        type: object
        properties:
          to: {type: string, title: Payee}
          amount: {type: number}
        required: [to, amount]
"""


def _env(tmp_path: Path) -> dict[str, str]:
    return store_env(tmp_path, HITL_API_URL="", HITL_TOKEN="")


async def _decide_on_its_view(store: str, approval_id: str, reviewer: str, reason: str) -> str:
    """Decide as a surface that showed the approval would: naming the digest of the view it drew, with a reason."""
    async with open_runtime(RuntimeSettings.from_env(store=store)) as rt:
        a = await rt.store.approvals.get(approval_id)
        view = (await rt.lifecycle.context_of(a)).config.present(a)
        request = DecideRequest(
            a.id, reviewer, DecisionKind.APPROVE, via="test", view_digest=view.digest(), reason=reason
        )
        await rt.lifecycle.decide(request, resume="inline")
        return view.digest()


async def test_audit_show_says_what_the_decider_saw_in_plain_words_with_their_reason(tmp_path: Path) -> None:
    env = _env(tmp_path)
    code, run, err = await hitl(
        "run", str(REFUND), "--var", "order_id=78291", "--var", "amount=900", "--var", "note=hi", "--json", env=env
    )
    assert code == 4, err
    aid = str(run["approval_id"])  # two finance approvers
    digest = await _decide_on_its_view(env["HITL_STORE"], aid, "U_FIN1", REASON)
    code, _, err = await hitl("resume", aid, "--reject", "--reason", "wrong account", "--as", "U_FIN2", env=env)
    assert code == 3, err

    code, shown_text, err = await hitl("audit", "show", aid, env=env)
    assert code == 0, err
    text = "\n".join(" ".join(line.split()) for line in shown_text.splitlines())  # the table's columns as one space
    assert "saw the card as shown at version 1 (checked)" in text
    assert "saw view" not in text and "hitl-view/" not in text and digest[:16] not in text  # no jargon
    reasons = [line.removeprefix("reason given ") for line in text.splitlines() if line.startswith("reason given ")]
    assert reasons == [REASON.replace("\u202e", "[U+202E]"), "wrong account"], text  # inert, its override shown
    assert "saw no view shown" in text  # the CLI's rejection showed no card

    code, verbose, err = await hitl("audit", "show", aid, "--verbose", env=env)
    assert code == 0 and f"digest {digest} (view drawn by hitl-view/1)" in " ".join(verbose.split()), (verbose, err)
    code, shown, err = await hitl("audit", "show", aid, "--json", env=env)
    assert code == 0, err
    assert [d["reason"] for d in shown["decisions"]] == [REASON, "wrong account"]
    assert shown["decisions"][0]["view_digest"] == digest

    code, _, err = await hitl("audit", "verify", "--verbose", env=env)
    assert code == 2 and "--verbose goes with `hitl audit show ID`" in err


async def test_show_takes_config_like_its_siblings(tmp_path: Path) -> None:
    env = _env(tmp_path)
    config = tmp_path / "pay.yaml"
    config.write_text(PAY)
    async with open_runtime(RuntimeSettings.from_env(store=env["HITL_STORE"], config=str(config))) as rt:
        proposed = await rt.contexts.default.service.propose(
            ProposeRequest("pay", {"to": "V-1", "amount": 40}, session_id="ses_pay")
        )
    assert proposed.approval is not None
    aid = proposed.approval.id

    code, text, err = await hitl("show", aid, "--config", str(config), env=env)
    assert code == 0, err
    assert "Payee (to)" in text  # the title pay.yaml gives the argument
    code, plain, err = await hitl("show", aid, env=env)
    assert code == 0 and "Payee" not in plain, (plain, err)  # without it: the built-in defaults' words
    missing = str(tmp_path / "missing.yaml")
    code, _, err = await hitl("show", aid, "--config", missing, env=env)
    assert code == 1 and "cannot read config" in err and "missing.yaml" in err and "[policy_invalid]" in err, err
    assert (await hitl("pending", "--config", missing, env=env))[0] == code  # as its sibling says it
