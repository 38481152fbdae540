"""What ``hitl init`` writes: a commented ``hitl.yaml``, a starter workflow and its tools (kept as text here, so
they ship inside the package and work from a wheel)."""

from __future__ import annotations

__all__ = ["FILES"]

HITL_YAML = """\
# hitl.yaml: who may approve what (reference: the README, section "Policy (hitl.yaml)").
requester: agent:starter          # who proposes actions (it can never approve its own)
roles:
  approvers: [U_YOU, U_TEAMMATE]  # Slack member ids, or any stable ids you pass as --as / API tokens
policy:
  allowed_tools: [look_up]        # run without asking
  denied_tools: []                # never run
  tools:
    send_payment:
      tier: approve               # auto | notify | approve | escalate
      role: approvers
      timeout: 4h                 # then the approval expires and the run stops
      reason_required: false
  rules:
    - name: large_payment         # dynamic rules: amounts, off-hours, velocity, rolling sums
      tools: [send_payment]
      when: "args.amount > 1000"
      tier: escalate
      quorum: 2                   # two distinct approvers
      role: approvers
slack:
  channel: "#approvals"           # where `hitl serve` posts the cards
"""

WORKFLOW_YAML = """\
# A starter workflow: look something up (runs freely), then pay (waits for an approver).
# Run: hitl run workflow.yaml --var to=acme --var amount=120
name: starter
version: 1
vars:
  to: null                        # required
  amount: null                    # required
tools:
  look_up:
    function: tools:look_up
    idempotent: true
  send_payment:
    function: tools:send_payment
    idempotent: true              # it deduplicates on the idempotency key hitl passes
steps:
  - id: lookup
    tool: look_up
    args:
      name: "{{ vars.to }}"
  - id: pay
    tool: send_payment
    args:
      to: "{{ steps.lookup.output.account }}"
      amount: "{{ vars.amount }}"
"""

TOOLS_PY = '''\
"""The starter workflow's tools. Replace them with yours: plain functions, typed (hitl derives each tool's JSON
Schema from its signature for the Modify form)."""

from __future__ import annotations

from pathlib import Path


def look_up(name: str) -> dict[str, str]:
    """Find the account to pay."""
    return {"name": name, "account": f"acct-{name}"}


def send_payment(to: str, amount: float, idempotency_key: str) -> dict[str, object]:
    """Pay, once per idempotency key (a recovered run never pays twice)."""
    ledger = Path("payments.log")
    done = ledger.read_text().splitlines() if ledger.exists() else []
    if not any(line.startswith(idempotency_key + " ") for line in done):
        with ledger.open("a") as f:
            f.write(f"{idempotency_key} {to} {amount}\\n")
    return {"to": to, "amount": amount}
'''

FILES = {"hitl.yaml": HITL_YAML, "workflow.yaml": WORKFLOW_YAML, "tools.py": TOOLS_PY}
