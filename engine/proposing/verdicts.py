"""The policy's verdict on a proposed call: the trust grants that count read, the rolling windows counted (a batch
takes its strictest item's), and the same verdict explained without recording anything."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from hitl.engine.domain.actions import ProposedAction, clean_args, window_events
from hitl.engine.domain.models import Approval, Tier
from hitl.engine.domain.policy import Policy, PolicyContext, Verdict, WindowStats
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.errors import ErrorCode, InvalidInput
from hitl.engine.policy_engines.ports import PolicyEngine
from hitl.engine.ports import Store
from hitl.engine.proposing.consulted import consulted
from hitl.engine.subscribers.windows import forget_windows

__all__ = ["counted_verdict", "explained", "trusted_tools"]


async def trusted_tools(store: Store, session_id: str, requester: str, now: float) -> frozenset[str]:
    """The tools trusted for ``requester`` in ``session_id``: another identity's grant in the same session, or
    the same identity's in another session, does not count."""
    if not session_id:
        return frozenset()
    grants = await store.trust.active(session_id, requester=requester, now=now)
    return frozenset(g.tool for g in grants)


async def explained(
    store: Store,
    policy: Policy,
    tool: str,
    args: Mapping[str, Any],
    *,
    session_id: str,
    requester: str,
    min_tier: Tier,
    instead_of: Approval | None,
    now: float,
    engines: Mapping[str, PolicyEngine],
) -> Verdict:
    """The verdict for an action, recording nothing: the windows read, not added to, the policy engines asked.
    ``instead_of``: the approval these arguments would replace (an edit): its own window events do not count
    against them."""
    clean = clean_args(tool, args)
    own = dict(window_events(instead_of)) if instead_of is not None else {}
    windows = {
        k: await store.windows.stats(k, now=now, window=w, exclude=own.get(k, ""))
        for k, (w, _) in policy.window_keys(tool, clean).items()
    }
    trusted = await trusted_tools(store, session_id, requester, now)
    external = await consulted(
        engines, policy, tool, clean, requester=requester, session_id=session_id, windows=windows
    )
    return policy.evaluate(
        tool,
        clean,
        PolicyContext(now=now, trusted_tools=trusted, windows=windows, min_tier=min_tier, external=external),
    )


async def counted_verdict(
    store: Store,
    policy: Policy,
    request: ProposeRequest,
    action: ProposedAction,
    now: float,
    engines: Mapping[str, PolicyEngine],
) -> tuple[Verdict, list[list[str]], bool]:
    """The policy's verdict on every item (a batch takes its strictest); each window event the action added now,
    ``[key, event id]``: forgotten if it ends without running (denied now, or rejected, superseded, expired,
    cancelled later); and whether every window already held the action's events (the same named call asked again,
    judged as it was then: its events are its first asking's, never this one's to forget). ``engines``: the policy
    engines of ``source:`` rules, asked for each item."""
    tool, batch = request.tool, request.batch
    trusted = request.trusted
    if not policy.trust_matters(tool):
        trusted = frozenset()
    elif trusted is None or tool in trusted:
        # Only the absence of a grant is taken on trust: a tool the caller names is checked again, so a revoked
        # grant never approves anything.
        trusted = await trusted_tools(store, request.session_id, action.requester, now)
    static = policy.static_verdict(tool) if batch is None and request.min_tier is Tier.AUTO else None
    if static is not None:
        return static, [], False
    verdicts: list[Verdict] = []
    counted: list[list[str]] = []
    seen = 0
    for i, item in enumerate(action.items):
        windows: dict[str, WindowStats] = {}
        for key, (window, amount) in policy.window_keys(tool, item).items():
            event = f"{action.event}#{i}" if batch is not None else action.event
            windows[key] = await store.windows.add(key, amount=amount, now=now, window=window, event_id=event)
            if windows[key].added:
                counted.append([key, event])
            else:
                seen += 1
        external = await consulted(
            engines, policy, tool, item, requester=action.requester, session_id=request.session_id, windows=windows
        )
        ctx = PolicyContext(
            now=now, trusted_tools=trusted, windows=windows, min_tier=request.min_tier, external=external
        )
        verdicts.append(policy.evaluate(tool, item, ctx))
    if batch is None:
        return verdicts[0], counted, seen > 0 and not counted
    typed = sorted({name for v in verdicts for name in v.confirm})
    if typed:  # each call's value must be typed by its reviewer: one approval of many cannot ask it
        await forget_windows(store, counted)
        raise InvalidInput(
            f"{tool} asks its reviewer to type {', '.join(typed)} for each call (confirm: in hitl.yaml), which a "
            "batch cannot ask; propose the calls one by one",
            code=ErrorCode.CONFIRMATION_MISMATCH,
            tool=tool,
        )
    strictest = max(verdicts, key=lambda v: (v.denied, v.tier.rank, v.quorum))
    if any(v.approve_reason for v in verdicts):  # any item's need of a reason is the batch's
        strictest = dataclasses.replace(strictest, approve_reason=True)
    return strictest, counted, seen > 0 and not counted
