"""``hitl.yaml``: policy, reviewer roles, requester, redaction and notification settings."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hitl.engine.config.api import ApiSpec
from hitl.engine.config.email import ContactSpec, EmailSpec, plain_to_network
from hitl.engine.config.mcp import AskPersonSpec, McpSpec, ask_person_policy
from hitl.engine.config.oversight import OversightSpec
from hitl.engine.config.web import WebSpec
from hitl.engine.config.yaml_file import load_model, parse_model
from hitl.engine.consequences.callables import check_consequences
from hitl.engine.domain.alerts import AlertsSpec
from hitl.engine.domain.failover import FailoverSpec
from hitl.engine.domain.models import Approval
from hitl.engine.domain.policy import Policy
from hitl.engine.domain.policy_spec import PolicySpec, RuleSpec, ToolPolicySpec
from hitl.engine.domain.presentation import Presentation
from hitl.engine.domain.questions import ASK_PERSON
from hitl.engine.domain.redaction import Redactor
from hitl.engine.domain.reviewers import Roles
from hitl.engine.errors import ErrorCode, PolicyError
from hitl.engine.receipts.spec import ReceiptsSpec

__all__ = ["HitlConfig", "NotifySpec", "RedactionSpec", "load_config", "parse_config"]


class RedactionPattern(BaseModel):
    """A labelled regular expression whose matches are masked in evidence and previews before anyone sees them."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    label: str = Field(pattern=r"^[a-z0-9_\-]{1,32}$")
    regex: str

    @field_validator("regex")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from exc
        return v


class RedactionSpec(BaseModel):
    """``redaction:`` in hitl.yaml: extra patterns to mask, and how much evidence is kept."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    patterns: list[RedactionPattern] = Field(default_factory=list)
    evidence_limit: int = Field(default=2000, ge=100, le=20000)
    """Characters of evidence kept (after redaction)."""


class NotifySpec(BaseModel):
    """Where review cards go. Channels are Slack channel ids or names."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    channel: str | None = None
    """Default approval channel."""
    channels: dict[str, str] = Field(default_factory=dict)
    """Per tier (``escalate``) or per role (``finance``) overrides; a role match wins over a tier match."""
    reminder_before: float = Field(default=600.0, ge=0)
    """Seconds before expiry at which the bot posts a reminder in the card's thread."""
    group: bool = True
    """Like approvals that queue up for one channel (a flood, Slack's pace) go on one group card, decidable one by
    one or together (``false``: a card each, as Slack's limits allow)."""
    run_role: str | None = Field(default=None, min_length=1, max_length=100)
    """The role (under ``roles:``) whose members may start a workflow registered under ``api.workflows`` from Slack
    with ``/hitl run``, the run acting for them (absent: ``/hitl run`` is off)."""


class HitlConfig(BaseModel):
    """The whole ``hitl.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    version: int = 1
    requester: str = "agent"
    """Default identity of whoever proposes actions (separation of duties compares against it)."""
    roles: dict[str, list[str]] = Field(default_factory=dict)
    policy: PolicySpec = Field(default_factory=PolicySpec)
    redaction: RedactionSpec = Field(default_factory=RedactionSpec)
    slack: NotifySpec = Field(default_factory=NotifySpec)
    api: ApiSpec = Field(default_factory=ApiSpec)
    mcp: McpSpec = Field(default_factory=McpSpec)
    oversight: OversightSpec = Field(default_factory=OversightSpec)
    alerts: AlertsSpec = Field(default_factory=AlertsSpec)
    receipts: ReceiptsSpec | None = None
    """Signed receipts for approved executions, which the protected system checks (absent: none are issued)."""
    web: WebSpec | None = None
    """The web inbox: reviewers sign in with OpenID Connect and decide on a page (absent: no web inbox)."""
    email: EmailSpec | None = None
    """Approval e-mail through an SMTP server, each message a pointer to the web inbox (absent: no e-mail)."""
    contacts: dict[str, ContactSpec] = Field(default_factory=dict, max_length=10_000)
    """Reviewer id -> how to reach them outside Slack (``{U_FIN1: {email: fin1@example.com}}``)."""
    production: bool = False
    """Refuse decisions made straight against the store (``hitl resume`` without ``HITL_API_URL``) and
    ``--auto-approve``: in production every decision is an authenticated one."""

    @model_validator(mode="before")
    @classmethod
    def _ask_person_is_a_tool(cls, data: Any) -> Any:
        """``mcp.ask_person`` becomes the policy's tool ``ask_person`` (its role, schema and timeout), so every
        surface asks, shows and decides it as any approval; a tool of that name declared by hand is refused."""
        mcp = data.get("mcp") if isinstance(data, dict) else None
        asked = mcp.get("ask_person") if isinstance(mcp, dict) else None
        if not isinstance(asked, dict):
            return data
        policy = data.get("policy") or {}
        tools = policy.get("tools") or {} if isinstance(policy, dict) else {}
        if not isinstance(policy, dict) or not isinstance(tools, dict):
            return data  # the section's own validation says what is wrong with it
        if ASK_PERSON in tools:
            raise ValueError(f"policy.tools.{ASK_PERSON} is reserved for mcp.ask_person: give the tool another name")
        try:
            entry = ask_person_policy(AskPersonSpec.model_validate(asked))
        except ValidationError:
            return data  # mcp.ask_person's own validation says what is wrong with it
        return {**data, "policy": {**policy, "tools": {**tools, ASK_PERSON: entry}}}

    @model_validator(mode="after")
    def _roles_exist(self) -> HitlConfig:
        known = set(self.roles)
        used = {t.role for t in self.policy.tools.values() if t.role} | {r.role for r in self.policy.rules if r.role}
        missing = sorted(used - known)
        if missing:
            raise ValueError(f"policy names roles that are not defined under 'roles': {', '.join(missing)}")
        return self

    @model_validator(mode="after")
    def _run_role_exists(self) -> HitlConfig:
        role = self.slack.run_role
        if role is not None and role not in self.roles:
            raise ValueError(f"slack.run_role names {role!r}, which is not defined under 'roles': add it there")
        return self

    @model_validator(mode="after")
    def _state_key_apart(self) -> HitlConfig:
        receipts = self.receipts
        if receipts is not None and receipts.key_file is None and receipts.key_env == self.mcp.state_key_env:
            raise ValueError(
                f"mcp.state_key_env names the receipt key's variable ({receipts.key_env}): the MCP request state "
                "needs a secret of its own (a different variable, e.g. HITL_MCP_STATE_KEY)"
            )
        return self

    @model_validator(mode="after")
    def _web_over_tls(self) -> HitlConfig:
        if self.production and self.web is not None and not self.web.secure:
            raise ValueError(
                "web.public_url must be https:// under production: true (session cookies and sign-in codes "
                "must not cross a network in the clear); put TLS in front of hitl serve"
            )
        return self

    @model_validator(mode="after")
    def _email_points_at_the_page(self) -> HitlConfig:
        if self.email is None:
            return self
        if self.web is None:
            raise ValueError(
                "email: needs web: (its public_url is where every message's link points, and the web inbox is where "
                "the reader decides): add web:, or remove email:"
            )
        if self.email.alert_role is not None and self.email.alert_role not in self.roles:
            raise ValueError(
                f"email.alert_role names {self.email.alert_role!r}, which roles: does not: nobody would get alerts "
                "by e-mail. Name a role, or remove alert_role"
            )
        if self.production and plain_to_network(self.email):
            raise ValueError(
                f"email.smtp_url sends plain SMTP to {self.email.host} under production: true (messages and the "
                "SMTP password would cross the network in the clear): use smtps://, or starttls: true"
            )
        return self

    @model_validator(mode="after")
    def _failover_has_somewhere_to_go(self) -> HitlConfig:
        named = [f"policy.tools.{t}" for t, spec in self.policy.tools.items() if spec.failover is not None]
        named += [f"policy.rules.{r.name}" for r in self.policy.rules if r.failover is not None]
        named += [f"policy.tiers.{t}" for t, spec in self.policy.tiers.items() if spec.failover is not None]
        if named and self.email is None:
            raise ValueError(
                f"{', '.join(sorted(named))} fail over to email, which is not configured: add email: (and the "
                "reviewers' contacts:), or remove failover"
            )
        return self

    @model_validator(mode="after")
    def _contacts_are_reviewers(self) -> HitlConfig:
        members = {m for ids in self.roles.values() for m in ids}
        if any(m.startswith("S") for m in members):
            return self  # a Slack user group's members are known only when the bot expands it
        unknown = sorted(set(self.contacts) - members)
        if unknown:
            raise ValueError(
                f"contacts names {', '.join(unknown)}, who no role under 'roles' lists: nobody would mail them. "
                "Add them to a role, or fix the id"
            )
        return self

    def failover_for(self, a: Approval) -> FailoverSpec | None:
        """Where ``a`` fails over when Slack cannot carry it: the failover of the rule that set its tier, else its
        tool's, else its tier's (None: Slack alone)."""
        rule = next((r for r in self.policy.rules if r.name == a.rule and r.failover is not None), None)
        if rule is not None:
            return rule.failover
        tool = self.policy.tools.get(a.tool)
        if tool is not None and tool.failover is not None:
            return tool.failover
        tier = self.policy.tiers.get(a.tier)
        return tier.failover if tier is not None else None

    def may_decide_tool(self, roles: frozenset[str], tool: str) -> bool:
        """Whether someone with ``roles`` may decide some approval of ``tool``: they hold the role its policy entry
        or one of the rules covering it requires, any reviewer role when none is required, or the admin role. Who
        may see the trust granted for a tool (session ids are the requester's business, not the workspace's)."""
        if not roles:
            return False
        if self.oversight.admin_role in roles and self.oversight.admin_role in self.roles:
            return True
        spec = self.policy.tools.get(tool)
        needed = {spec.role} if spec is not None and spec.role else set()
        needed |= {r.role for r in self.policy.rules if r.role and ("*" in r.tools or tool in r.tools)}
        return not needed or bool(needed & roles)

    def declared_schema(self, tool: str) -> dict[str, Any] | None:
        """``tool``'s argument schema as ``hitl.yaml`` declares it (None: it declares none). A card takes its
        arguments' titles, help and currency from here alone: a caller's own schema is untrusted text."""
        return self.policy.declared_schema(tool)

    def present(self, a: Approval) -> Presentation:
        """The one view of ``a`` every surface draws, with this file's summary sentences and declared schemas."""
        return self.policy.present(a)

    def may_halt(self, roles: frozenset[str]) -> bool | None:
        """Whether someone with ``roles`` may halt and unhalt: True or False when the admin role is defined, None
        when it is not (nobody holds it: a surface decides what that means)."""
        admin = self.oversight.admin_role
        return admin in roles if admin in self.roles else None

    def quorum_problems(self) -> list[tuple[tuple[str | int, ...], str]]:
        """Quorums the roles cannot meet: ``(where, message)`` for each tool or rule that asks more distinct
        approvers than its role has members (the requester never counts). A role with a Slack user group is left
        out: its size is known only when the bot expands it."""
        out: list[tuple[tuple[str | int, ...], str]] = []

        def check(where: tuple[str | int, ...], name: str, role: str | None, quorum: int) -> None:
            if role is None and quorum == 1:
                return  # any reviewer: a file with no roles yet is not yet a deployment
            members = set(self.roles.get(role, ())) if role else {m for ids in self.roles.values() for m in ids}
            if any(m.startswith("S") for m in members):
                return
            members.discard(self.requester)
            if quorum > len(members):
                who = f"role {role!r}" if role else "all roles together"
                out.append(
                    (
                        where,
                        f"{name} asks {quorum} distinct approvers but {who} has {len(members)}: it can never be "
                        f"approved. Add members to the role, or lower the quorum",
                    )
                )

        for tool, spec in sorted(self.policy.tools.items()):
            check(("policy", "tools", tool, "quorum"), tool, spec.role, spec.quorum)
        for i, rule in enumerate(self.policy.rules):
            if rule.quorum is not None:
                check(("policy", "rules", i, "quorum"), rule.name, rule.role, rule.quorum)
        return out

    def hand_on_problems(self) -> list[tuple[tuple[str | int, ...], str]]:
        """What can never work in ``backup_role`` and ``confirm``: a backup role ``roles:`` does not name (nobody
        would get the approval), and a value to confirm that the tool's declared schema has no argument for (never
        asked, so never confirmed: likely a typo)."""
        out: list[tuple[tuple[str | int, ...], str]] = []
        tools: list[tuple[tuple[str | int, ...], str, ToolPolicySpec | RuleSpec, list[str]]] = [
            (("policy", "tools", tool), tool, spec, [tool]) for tool, spec in sorted(self.policy.tools.items())
        ]
        tools += [(("policy", "rules", i), r.name, r, r.tools) for i, r in enumerate(self.policy.rules)]
        for where, name, spec, covered in tools:
            if spec.backup_role is not None and spec.backup_role not in self.roles:
                out.append(
                    (
                        (*where, "backup_role"),
                        f"{name} hands on to role {spec.backup_role!r}, which roles: does not "
                        "name: nobody would get it. Add the role, or name another",
                    )
                )
            for tool in covered:
                declared = self.policy.tools.get(tool)
                props = (declared.schema_ or {}).get("properties") if declared is not None else None
                missing = [c for c in spec.confirm if isinstance(props, dict) and c not in props]
                if missing:
                    out.append(
                        (
                            (*where, "confirm"),
                            f"{name} asks to confirm {', '.join(missing)}, which {tool}'s schema "
                            "has no argument for: it would never be asked. Name an argument of the tool",
                        )
                    )
        return out

    def build_policy(self) -> Policy:
        """The compiled policy of ``policy:``."""
        return Policy.from_spec(self.policy)

    def build_roles(self) -> Roles:
        """The reviewer roles of ``roles:``."""
        return Roles.from_config(self.roles)

    def build_redactor(self) -> Redactor:
        """The redactor of evidence: the built-in patterns and ``redaction.patterns``."""
        return Redactor.with_patterns((p.label, p.regex) for p in self.redaction.patterns)


def load_config(path: str | Path | None) -> HitlConfig:
    """Load ``hitl.yaml``; ``None`` gives the defaults (every tool needs approval). Errors name file and line."""
    if path is None:
        return HitlConfig()
    cfg = load_model(path, HitlConfig, code=ErrorCode.POLICY_INVALID, what="config")
    # A consequence's module beside hitl.yaml is found as a workflow's tools are: its folder at the *end* of
    # sys.path, so it shadows no installed package (and a hitl serve worker is given the same path).
    folder = str(Path(path).resolve().parent)
    if folder not in sys.path and any(spec.consequence for spec in cfg.policy.tools.values()):
        sys.path.append(folder)
    _check_compiles(cfg, str(path))
    return cfg


def parse_config(text: str, *, source: str = "<string>") -> HitlConfig:
    """``hitl.yaml`` text, checked whole (every bad field named with its line) and its policy conditions compiled."""
    cfg = parse_model(text, HitlConfig, code=ErrorCode.POLICY_INVALID, what="config", source=source)
    _check_compiles(cfg, source)
    return cfg


def _check_compiles(cfg: HitlConfig, source: str) -> None:
    try:
        cfg.build_policy()
        check_consequences(cfg.policy)  # imported now: a bad reference stops the process before it serves anyone
    except PolicyError as exc:
        raise PolicyError(f"{source}: {exc.message}", **exc.context) from None
