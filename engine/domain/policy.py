"""Policy evaluation: which tier an action needs, who may approve it, and why.

Precedence for the base tier (first match wins)::

    denied_tools  >  "!tool" in allowed_tools  >  session trust  >  "*"  >  tool listed in allowed_tools
                  >  the tool's own tier  >  unknown tool (APPROVE, fail closed)

Dynamic rules then run; each one that fires can only raise the tier. A rule whose expression cannot be
evaluated fires (fail closed) and says so.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, time, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from hitl.engine.domain.arg_schema import sample_args
from hitl.engine.domain.durations import format_duration, whole_unit
from hitl.engine.domain.frozen import quick_init
from hitl.engine.domain.models import Tier
from hitl.engine.domain.policy_source import ExternalAnswer, outcome
from hitl.engine.domain.policy_spec import AttentionSpec, HandOnSpec, PolicySpec, RuleSpec, ToolPolicySpec
from hitl.engine.domain.thresholds import threshold_of
from hitl.engine.errors import ErrorCode, PolicyError

__all__ = ["Fired", "Policy", "PolicyContext", "Verdict", "WindowStats"]

_ENV = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
_UNKNOWN = "unknown_tool"


@dataclass(frozen=True)
class WindowStats:
    """What a rolling window held before this request (for a request counted before, as it was then)."""

    count: int = 0
    total: float = 0.0
    added: bool = True
    """Whether this request's event was added now; False when it was counted before (the same call asked again),
    and so belongs to whatever counted it first."""


@dataclass(frozen=True)
class PolicyContext:
    """Everything outside the action that the policy may look at. ``now`` is epoch seconds."""

    now: float
    trusted_tools: frozenset[str] = frozenset()
    windows: Mapping[str, WindowStats] = field(default_factory=dict)
    """Keyed by :meth:`Policy.window_keys` keys."""
    min_tier: Tier = Tier.AUTO
    """A floor set by the caller, e.g. a workflow step marked ``approval: required``."""
    external: Mapping[str, ExternalAnswer] = field(default_factory=dict)
    """The policy engines' answers, by source rule name (a rule without one fails closed)."""


@dataclass(frozen=True)
class Fired:
    """One rule that contributed to the verdict."""

    rule: str
    tier: Tier
    reason: str
    plain: str = ""
    """The same reason as a reviewer reads it on the card (empty: the reason itself reads well)."""
    ratio: float | None = None
    """How far over its threshold the action is: the amount the rule compares divided by the threshold it compares
    it with (a ``rolling_sum``'s total over its ``threshold``; a ``when`` of the form ``args.amount > 500``), or
    None when the rule has no such amount. The queue ranks by it."""


@quick_init
@dataclass(frozen=True)
class Verdict:
    """The policy's answer for one action."""

    tool: str
    tier: Tier
    rule: str
    required_role: str | None
    quorum: int
    trustable: bool
    denied: bool
    timeout: float
    fired: tuple[Fired, ...]
    reason_required: bool = False
    confirm: tuple[str, ...] = ()
    """Arguments a reviewer types to approve (from the tool, the tier and every rule that fired)."""
    approve_reason: bool = False
    """Whether approving needs a reason."""
    hand_on: HandOnSpec | None = None
    """When and to whom an unanswered approval is handed on (the rule that set the tier's, else the tool's)."""

    @property
    def reasons(self) -> tuple[str, ...]:
        """Every rule that fired and why, in the policy's words (for ``hitl show``, ``policy explain``, the audit)."""
        return tuple(f.reason for f in self.fired)

    @property
    def trusted(self) -> bool:
        """Let through by a reviewer's Trust (a grant in the session), not by the policy alone."""
        return self.rule == "trusted"

    @functools.cached_property
    def told(self) -> bool:
        """Runs without a person, but reviewers are told (an FYI, audited first): a notify call, or one a Trust let
        through (what a Trust lets through is seen, not only granted)."""
        return self.tier is Tier.NOTIFY or self.rule == "trusted"

    @property
    def why(self) -> tuple[str, ...]:
        """Why a person must decide, in a reviewer's words: the sentence of each rule that asks for a person, the
        strictest first (a rule's or a tool's ``reason:`` when it has one)."""
        asking = sorted((f for f in self.fired if f.tier.needs_human), key=lambda f: -f.tier.rank)
        return tuple(dict.fromkeys(f.plain or f.reason for f in asking))

    @property
    def ratio(self) -> float | None:
        """The amount over threshold of the rule that set the tier (else the largest of the rules that ask for a
        person), None when no such rule compares an amount: the queue's second sort key."""
        own = [f.ratio for f in self.fired if f.rule == self.rule and f.ratio is not None]
        if own:
            return own[0]
        asking = [f.ratio for f in self.fired if f.tier.needs_human and f.ratio is not None]
        return max(asking) if asking else None

    def explain(self) -> str:
        """Several lines a reviewer can read."""
        if self.denied:
            head = f"{self.tool}: denied by policy"
        else:
            who = f", approver role {self.required_role}" if self.required_role else ""
            n = f", {self.quorum} distinct approvers" if self.quorum > 1 else ""
            head = f"{self.tool}: {self.tier}{who}{n}"
        return "\n".join([head, *(f"  - {r}" for r in self.reasons)])


@dataclass(frozen=True)
class _Compiled:
    spec: RuleSpec
    when: Any = None
    subject: Any = None
    value: Any = None
    tz: tzinfo | None = None
    threshold: tuple[str, float] | None = None
    """``(argument, threshold)`` of a ``when`` that compares one argument with a positive number."""


class Policy:
    """A validated, compiled policy. Build it with :meth:`from_spec`; evaluation is pure."""

    def __init__(self, spec: PolicySpec, rules: list[_Compiled]) -> None:
        self.spec = spec
        self._rules = rules
        allowed = spec.allowed_tools
        self._always_ask = frozenset(t[1:] for t in allowed if t.startswith("!"))
        self._allow_all = "*" in allowed
        self._allowed = frozenset(t for t in allowed if not t.startswith("!") and t != "*")
        self._denied = frozenset(t for t in spec.denied_tools if t != "*")
        self._deny_unknown = "*" in spec.denied_tools
        # Built once: an unlisted tool's spec is asked for on every allowed call, the hot path of every adapter.
        self._default_spec = ToolPolicySpec(tier=spec.default_tier, timeout=spec.default_timeout, trustable=False)
        self._static: dict[str, Verdict | None] = {}

    @classmethod
    def from_spec(cls, spec: PolicySpec) -> Policy:
        """Compile every expression now, so a broken rule fails at load time, not at 3 a.m."""
        compiled: list[_Compiled] = []
        for i, rule in enumerate(spec.rules):
            where = f"policy.rules[{i}] ({rule.name})"
            zone = rule.off_hours.timezone if rule.off_hours else None
            try:
                tz = ZoneInfo(zone) if zone else None
            except (KeyError, ValueError) as exc:
                raise PolicyError(
                    f"{where}: unknown timezone {zone!r}; use an IANA name like Europe/Berlin",
                    code=ErrorCode.POLICY_INVALID,
                    rule=rule.name,
                ) from exc
            stats = rule.velocity or rule.rolling_sum
            compiled.append(
                _Compiled(
                    spec=rule,
                    when=_compile(rule.when, where, "when") if rule.when else None,
                    subject=_compile(stats.subject, where, "subject") if stats else None,
                    value=_compile(rule.rolling_sum.value, where, "value") if rule.rolling_sum else None,
                    tz=tz,
                    threshold=threshold_of(rule.when) if rule.when else None,
                )
            )
        return cls(spec, compiled)

    def condition_problems(self) -> list[tuple[int, str, str]]:
        """Rules whose expressions cannot be evaluated on arguments their tool's declared schema allows:
        ``(rule index, field, message)`` for each. At run time such a rule fails closed (it fires); this finds it
        before then (``hitl validate``). Each rule is tried on the required arguments alone and on all of them."""
        out: list[tuple[int, str, str]] = []
        for i, rule in enumerate(self._rules):
            for tool, tool_spec in sorted(self.spec.tools.items()):
                if tool_spec.schema_ is not None and _matches(rule.spec.tools, tool):
                    failed = _first_failure(rule, tool, tool_spec.schema_)
                    if failed is not None:
                        out.append((i, *failed))
        return out

    def knows(self, tool: str) -> bool:
        return tool in self.spec.tools or tool in self._allowed or tool in self._always_ask

    def trust_matters(self, tool: str) -> bool:
        """Whether a session trust grant could change this tool's verdict (else callers skip looking it up)."""
        spec = self.spec.tools.get(tool)
        if spec is None or not spec.trust_reaches or tool in self._always_ask or tool in self._denied:
            return False
        if self._asks_attention(spec):
            return False
        return not (self._allow_all or tool in self._allowed)

    def tool_spec(self, tool: str) -> ToolPolicySpec:
        spec = self.spec.tools.get(tool)
        return spec if spec is not None else self._default_spec

    def window_keys(self, tool: str, args: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
        """``{key: (window_seconds, amount)}`` for every stateful rule that applies to this action.

        The caller fetches the prior :class:`WindowStats` for each key (and records this request) before
        calling :meth:`evaluate`. A subject that cannot be computed gets a key of its own so it still counts.
        """
        out: dict[str, tuple[float, float]] = {}
        for rule in self._rules:
            stats = rule.spec.velocity or rule.spec.rolling_sum
            if stats is None or not _matches(rule.spec.tools, tool):
                continue
            scope = {"tool": tool, "args": args}
            subject = _safe_eval(rule.subject, scope)
            amount = 1.0
            if rule.value is not None:
                raw = _safe_eval(rule.value, scope)
                amount = float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else 0.0
            out[f"{rule.spec.name}:{_key_text(subject)}"] = (stats.window, amount)
        return out

    def static_verdict(self, tool: str) -> Verdict | None:
        """The verdict for ``tool`` when nothing but its name decides it (no rule can fire on it, no trust grant
        can change it, no workflow step raises its tier), else None: the callers' hot path (every allowed agent
        call) skips evaluating and the windows. Cached per tool name, at most ``_STATIC_CACHE`` of them."""
        if tool in self._static:
            return self._static[tool]
        static = not self.trust_matters(tool) and not any(_matches(r.spec.tools, tool) for r in self._rules)
        verdict = self.evaluate(tool, {}, PolicyContext(now=0.0)) if static else None
        if len(self._static) < _STATIC_CACHE:
            self._static[tool] = verdict
        return verdict

    def evaluate(
        self, tool: str, args: Mapping[str, Any], ctx: PolicyContext, denied_by: Fired | None = None
    ) -> Verdict:
        """The tier, approver role, quorum and every rule that fired (``denied_by``: a policy engine's deny)."""
        base = None if denied_by is not None else self._base(tool, ctx)
        if base is None:
            return Verdict(
                tool=tool,
                tier=Tier.ESCALATE,
                rule=denied_by.rule if denied_by else "denied",
                required_role=None,
                quorum=1,
                trustable=False,
                denied=True,
                timeout=0.0,
                fired=(denied_by or Fired("denied", Tier.ESCALATE, f"{tool} is in denied_tools: it never runs"),),
            )
        tier, rule_name, fired = base
        tspec = self.tool_spec(tool)
        role, quorum = tspec.role, tspec.quorum
        if ctx.min_tier.rank > tier.rank:
            tier, rule_name = ctx.min_tier, "step_requires_approval"
            fired.append(
                Fired(
                    rule_name, tier, f"the workflow step requires {tier}", "The workflow asks a person to review this."
                )
            )
        raised = self._raised(tool, args, ctx, tspec.tier, fired)
        if raised is None:
            return self.evaluate(tool, args, ctx, denied_by=fired[-1])
        top = max((r.tier for r in raised), key=lambda t: t.rank) if raised else None
        if top is not None and top.rank >= tier.rank:
            at_top = [r for r in raised if r.tier is top]
            if top.rank > tier.rank or rule_name == "tool_tier":
                tier, rule_name = top, at_top[0].name
            role = next((r.role for r in at_top if r.role), role)
            quorum = max([quorum, *(r.quorum for r in at_top if r.quorum)])
        if tier.rank < Tier.APPROVE.rank:
            quorum = 1
        confirm, approve_reason = self._attention(tspec, tier, raised)
        hand_on: HandOnSpec | None = next((r for r in raised if r.name == rule_name and r.backup_role), None)
        if hand_on is None and tspec.backup_role:
            hand_on = tspec
        trustable = (
            tspec.trust_reaches
            and tier is not Tier.SELF
            and self.knows(tool)
            and tool not in self._always_ask
            and tier is not Tier.ESCALATE
            and not confirm
            and not approve_reason
        )
        return Verdict(
            tool=tool,
            tier=tier,
            rule=rule_name,
            required_role=role,
            quorum=quorum,
            trustable=trustable,
            denied=False,
            timeout=tspec.timeout,
            fired=tuple(fired),
            reason_required=tspec.reason_required,
            confirm=confirm,
            approve_reason=approve_reason,
            hand_on=hand_on if tier.needs_human else None,
        )

    def _raised(
        self, tool: str, args: Mapping[str, Any], ctx: PolicyContext, floor: Tier, fired: list[Fired]
    ) -> list[RuleSpec] | None:
        """Each rule that fires, added to ``fired``, as it raises the call (a source rule with its engine's tier,
        role and quorum); None when a policy engine denies the call (its reason last in ``fired``)."""
        raised: list[RuleSpec] = []
        for rule in self._rules:
            spec = rule.spec
            if spec.source is not None and _matches(spec.tools, tool):
                at_least, answer = max(floor, spec.tier, key=lambda t: t.rank), ctx.external.get(spec.name)
                got = outcome(spec.name, spec.source, at_least, answer, role=spec.role, quorum=spec.quorum)
                fired.append(Fired(spec.name, got.tier, got.reason, got.plain))
                if got.denied:
                    return None
                raised.append(spec.model_copy(update={"tier": got.tier, "role": got.role, "quorum": got.quorum}))
            elif (hit := self._fire(rule, tool, args, ctx)) is not None:
                fired.append(hit)
                raised.append(spec)
        return raised

    def _attention(self, tspec: ToolPolicySpec, tier: Tier, raised: list[RuleSpec]) -> tuple[tuple[str, ...], bool]:
        """What approving takes (the arguments to type, whether a reason is needed): the tool's, its tier's and each
        fired rule's together. Nothing below approve asks anything: nobody approves it."""
        if not tier.needs_human:
            return (), False
        specs: list[AttentionSpec] = [tspec, *raised]
        if tier in self.spec.tiers:
            specs.append(self.spec.tiers[tier])
        confirm = tuple(dict.fromkeys(name for s in specs for name in s.confirm))
        return confirm, any(s.approve_reason == "required" for s in specs)

    def _asks_attention(self, tspec: ToolPolicySpec | None) -> bool:
        """Whether approving ``tspec``'s tool asks more than a click on its own (its spec or its tier's): a Trust
        could never have been given for it, so none lets it through."""
        if tspec is None:
            return False
        tier = self.spec.tiers.get(tspec.tier)
        return bool(
            tspec.confirm
            or tspec.approve_reason == "required"
            or (tier is not None and tspec.tier.needs_human and (tier.confirm or tier.approve_reason == "required"))
        )

    def _base(self, tool: str, ctx: PolicyContext) -> tuple[Tier, str, list[Fired]] | None:
        if tool in self._denied:
            return None
        tspec = self.spec.tools.get(tool)
        if tool in self._always_ask:
            tier = max(tspec.tier if tspec else Tier.APPROVE, Tier.APPROVE, key=lambda t: t.rank)
            return (
                tier,
                "always_ask",
                [
                    Fired(
                        "always_ask",
                        tier,
                        f"{tool} is marked !{tool}: always ask, never trust",
                        (tspec.reason if tspec else None) or f"{tool} always asks a person first.",
                    )
                ],
            )
        if tool in ctx.trusted_tools and (tspec is None or tspec.trust_reaches) and not self._asks_attention(tspec):
            return (
                Tier.AUTO,
                "trusted",
                [Fired("trusted", Tier.AUTO, f"a reviewer trusted {tool} for this session")],
            )
        if self._allow_all:
            return Tier.AUTO, "allow_all", [Fired("allow_all", Tier.AUTO, "allowed_tools contains '*'")]
        if tool in self._allowed:
            return Tier.AUTO, "allowed", [Fired("allowed", Tier.AUTO, f"{tool} is in allowed_tools")]
        if tspec is not None:
            who = f", approver role {tspec.role}" if tspec.role else ""
            plain = tspec.reason or _needs(tool, tspec.role, tspec.quorum, tspec.tier)
            return (
                tspec.tier,
                "tool_tier",
                [Fired("tool_tier", tspec.tier, f"{tool}: tool policy sets {tspec.tier}{who}", plain)],
            )
        if self._deny_unknown:
            return None
        return (
            Tier.APPROVE,
            _UNKNOWN,
            [
                Fired(
                    _UNKNOWN,
                    Tier.APPROVE,
                    f"{tool} is not in the policy: unknown tools need approval",
                    f"hitl.yaml does not list {tool}, so a person decides.",
                )
            ],
        )

    def _fire(self, rule: _Compiled, tool: str, args: Mapping[str, Any], ctx: PolicyContext) -> Fired | None:
        spec = rule.spec
        if not _matches(spec.tools, tool):
            return None
        scope = {"tool": tool, "args": args}
        if rule.when is not None:
            try:
                hit = bool(rule.when(**scope))
            except (TemplateError, TypeError, ValueError, ArithmeticError) as exc:
                return Fired(
                    spec.name,
                    spec.tier,
                    f"{spec.name}: could not evaluate '{spec.when}' ({exc}); treated as fired (fail closed)",
                    f"A rule ({spec.name}) could not be checked on these arguments, so a person decides.",
                )
            if not hit:
                return None
            return Fired(spec.name, spec.tier, spec.reason or f"{spec.name}: {spec.when}", ratio=_ratio(rule, args))
        if spec.off_hours is not None and rule.tz is not None:
            return self._off_hours(rule, ctx.now)
        key = next((k for k in self.window_keys(tool, args) if k.startswith(f"{spec.name}:")), None)
        prior = ctx.windows.get(key, WindowStats()) if key else WindowStats()
        if spec.velocity is not None:
            count = prior.count + 1
            if count > spec.velocity.max:
                return Fired(
                    spec.name,
                    spec.tier,
                    spec.reason
                    or (
                        f"{spec.name}: {count} requests for this subject within {_human(spec.velocity.window)} "
                        f"(limit {spec.velocity.max})"
                    ),
                )
            return None
        if spec.rolling_sum is not None and key is not None:
            _, amount = self.window_keys(tool, args)[key]
            total = prior.total + amount
            if total > spec.rolling_sum.threshold:
                limit = spec.rolling_sum.threshold
                ratio = total / limit if limit > 0 else None
                return Fired(spec.name, spec.tier, _rolling_sum_reason(spec, amount, prior), ratio=ratio)
        return None

    def _off_hours(self, rule: _Compiled, now: float) -> Fired | None:
        spec = rule.spec
        oh = spec.off_hours
        assert oh is not None and rule.tz is not None
        local = datetime.fromtimestamp(now, tz=rule.tz)
        start, end, t = time.fromisoformat(oh.start), time.fromisoformat(oh.end), local.time()
        outside = (t >= start or t < end) if start > end else (start <= t < end)
        weekend = oh.weekends and local.weekday() >= 5
        if outside or weekend:
            when = "weekend" if weekend else f"{local:%H:%M}"
            return Fired(
                spec.name,
                spec.tier,
                spec.reason or f"{spec.name}: outside working hours ({when} {oh.timezone})",
            )
        return None


def _needs(tool: str, role: str | None, quorum: int, tier: Tier = Tier.APPROVE) -> str:
    """The default sentence of a tool that needs a person."""
    if tier is Tier.SELF:
        return f"{tool} asks the person the agent acts for to confirm it."
    who = f"{quorum} {role} approvers" if quorum > 1 and role else f"{quorum} approvers" if quorum > 1 else None
    return f"{tool} needs approval from {who or (f'a {role} reviewer' if role else 'a reviewer')}."


def _first_failure(rule: _Compiled, tool: str, schema: dict[str, Any]) -> tuple[str, str] | None:
    """The first of ``rule``'s expressions that fails on sample arguments of ``schema``: (field, message)."""
    spec = rule.spec
    stats = spec.velocity or spec.rolling_sum
    exprs = [
        ("when", spec.when, rule.when),
        ("subject", stats.subject if stats else None, rule.subject),
        ("value", spec.rolling_sum.value if spec.rolling_sum else None, rule.value),
    ]
    for full in (False, True):
        args = sample_args(schema, full=full)
        for name, text, fn in exprs:
            if fn is None:
                continue
            try:
                got = fn(tool=tool, args=args)
                if name == "subject" and got is None:  # every call without it would share one key
                    raise ValueError("it gives nothing: an argument it reads is missing")
                elif name == "value" and (isinstance(got, bool) or not isinstance(got, int | float)):
                    raise ValueError(f"it gives {type(got).__name__}, not a number")
                elif name == "when":
                    bool(got)
            except (TemplateError, TypeError, ValueError, ArithmeticError) as exc:
                which = "every argument given" if full else "only the required arguments given"
                return name, (
                    f"{spec.name}: {name} '{text}' cannot be evaluated for {tool} with {which} ({exc}); at run time "
                    f"it would fail closed on every such call. Make the argument required in {tool}'s schema, or "
                    "guard the expression (e.g. `args.amount is defined and args.amount > 500`)"
                )
    return None


def _ratio(rule: _Compiled, args: Mapping[str, Any]) -> float | None:
    """The compared argument over the threshold it was compared with (None: no such comparison, or no number)."""
    if rule.threshold is None:
        return None
    name, limit = rule.threshold
    value = args.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value) / limit
    except (ValueError, OverflowError):
        return None


def _compile(expr: str, where: str, what: str) -> Any:
    try:
        return _ENV.compile_expression(expr)
    except TemplateError as exc:
        raise PolicyError(f"{where}.{what}: cannot compile {expr!r}: {exc}", rule=where) from exc


def _safe_eval(fn: Any, scope: Mapping[str, Any]) -> Any:
    try:
        return fn(**scope)
    except (TemplateError, TypeError, ValueError, ArithmeticError):
        return "<unresolved>"


def _key_text(subject: Any) -> str:
    """A subject as a window key; one that cannot be turned into text (undefined) gets the unresolved key."""
    try:
        return str(subject)
    except TemplateError:
        return "<unresolved>"


_STATIC_CACHE = 4096


def _matches(patterns: list[str], tool: str) -> bool:
    return "*" in patterns or tool in patterns


def _human(seconds: float) -> str:
    """A window as the policy writes it: "1d", "12h", "90s"."""
    return format_duration(seconds)


def _span(seconds: float) -> str:
    """A window as an adjective: "1-day", "12-hour", "90-second"."""
    count, unit = whole_unit(seconds)
    return f"{count:g}-{unit}"


def _rolling_sum_reason(spec: RuleSpec, amount: float, prior: WindowStats) -> str:
    """Why a rolling sum fired, in the numbers that made it: one request alone over the limit says so; requests that
    add up over it name how many came earlier (only then may it be a split transaction)."""
    assert spec.rolling_sum is not None
    limit, window = spec.rolling_sum.threshold, _human(spec.rolling_sum.window)
    if prior.count == 0:
        parts = f"{amount:g} alone is over the {_span(spec.rolling_sum.window)} limit of {limit:g}"
        return f"{spec.reason} ({parts})" if spec.reason else f"{spec.name}: {parts} for this subject"
    earlier = "1 earlier request" if prior.count == 1 else f"{prior.count} earlier requests"
    parts = (
        f"{amount + prior.total:g} within {window}: {amount:g} now + {prior.total:g} from {earlier} that ran or may "
        f"still run, over {limit:g}"
    )
    return (
        f"{spec.reason} ({parts})"
        if spec.reason
        else f"{spec.name}: {parts} for this subject (possible split transaction)"
    )
