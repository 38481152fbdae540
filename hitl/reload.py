"""``hitl serve`` reading ``hitl.yaml`` again on SIGHUP: who holds which role, and who a web sign-in is, change
while it serves.

What takes effect at once, on every surface: ``roles:`` (a Slack click, an API decision and the web page each
resolve the decider's roles at the decision, so a reviewer removed from a role is refused at their next one, a page
drawn before the change included), Slack user groups (read again at the next decision), and ``web.subjects`` /
``web.emails`` (a session whose subject no longer maps to its reviewer ends). API tokens are read live anyway. The
policy and everything else ``hitl serve`` composed at start stay as they were: the reload says which sections
changed and that they need a restart, rather than pretending. A reload that fails (the file unreadable or
invalid) changes nothing, logs one ERROR saying what to fix, and is audited; a successful one is audited too
(``config.reloaded``, with what changed in roles).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path

from hitl.bot.outbound.reviewers import SlackReviewers
from hitl.engine.config.hitl_yaml import HitlConfig, load_config
from hitl.engine.delegation.delegations import DelegatedReviewers
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.reviewers import ConfiguredReviewers
from hitl.engine.errors import EngineError
from hitl.engine.ports import ReviewerDirectory, Store
from hitl.engine.runtime.compose import RunContexts
from hitl.web.app import WebInbox

__all__ = ["EVENT", "ConfigReload", "role_changes"]

log = logging.getLogger(__name__)

EVENT = "config.reloaded"
"""The audit event of every reload, done (outcome ``ok``) or refused (the configuration's error code)."""
LIVE_PARTS = {"roles": None, "api": {"tokens"}, "web": {"subjects", "emails"}}
"""What of hitl.yaml a running ``hitl serve`` follows: ``roles:`` whole, ``api.tokens`` (re-read at every request),
``web.subjects`` and ``web.emails``; a change anywhere else needs a restart."""
MAX_DETAIL = 2000
"""Characters of an audit line's detail (a reload that rewrote many roles says the first of them)."""


def role_changes(before: dict[str, list[str]], after: dict[str, list[str]]) -> list[str]:
    """What changed in ``roles:``, role by role: ``support: -U2 +U7``, ``ops added: U9``, ``audit removed``."""
    said = []
    for role in sorted(set(before) | set(after)):
        old, new = set(before.get(role, [])), set(after.get(role, []))
        if role not in after:
            said.append(f"{role} removed")
        elif role not in before:
            said.append(f"{role} added: {' '.join(sorted(new)) or 'nobody'}")
        elif old != new:
            said.append(
                f"{role}: " + " ".join([f"-{m}" for m in sorted(old - new)] + [f"+{m}" for m in sorted(new - old)])
            )
    return said


def _restart_needed(before: HitlConfig, after: HitlConfig) -> list[str]:
    """The sections that changed in what a running ``hitl serve`` does not follow."""
    changed = []
    for key in HitlConfig.model_fields:
        old, new = getattr(before, key), getattr(after, key)
        live = LIVE_PARTS.get(key, set())
        if live is None:
            continue
        if live and old is not None and new is not None:
            old, new = old.model_dump(exclude=live), new.model_dump(exclude=live)
        if old != new:
            changed.append(key)
    return changed


@dataclass
class ConfigReload:
    """Reads ``path`` again and hands its roles and web mappings to everything ``hitl serve`` decides with."""

    path: str | None
    started: HitlConfig
    """The configuration ``hitl serve`` started with: what still applies of the sections not followed live."""
    contexts: RunContexts
    store: Store
    slack: ReviewerDirectory
    """The Slack side's reviewer directory (its user groups are read again at the next decision)."""
    inbox: WebInbox | None
    actor: str
    config: HitlConfig | None = None
    """The configuration as last loaded (at start, or by the last reload that worked)."""
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _tasks: set[asyncio.Task[bool]] = field(default_factory=set)

    def soon(self) -> None:
        """Reload in a task of its own (what SIGHUP's handler calls: it may not wait)."""
        task = asyncio.get_running_loop().create_task(self.reload())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def reload(self) -> bool:
        """Read hitl.yaml again and apply what may change live; False when it could not be read or is invalid (then
        nothing changed)."""
        async with self._lock:  # two signals in a row: one reload after the other, each whole
            if self.path is None:
                log.error("hitl serve runs without a hitl.yaml: there is nothing to reload")
                return False
            try:
                fresh = await asyncio.to_thread(load_config, self.path)
            except EngineError as exc:
                log.error(
                    "hitl.yaml was not reloaded and nothing changed: %s; fix it, then send SIGHUP again", exc.message
                )
                await self._audit(str(exc.code), f"not reloaded, nothing changed: {exc.message}")
                return False
            said = self._apply(fresh)
            log.info("hitl.yaml reloaded: %s", said)
            await self._audit("ok", said)
            return True

    def _apply(self, fresh: HitlConfig) -> str:
        """Hand ``fresh``'s roles and web mappings to every surface; what changed, as the audit says it."""
        roles = fresh.build_roles()
        served = Path(self.path).resolve() if self.path else None
        for context in self.contexts.composed():
            if context.config_path is not None and Path(context.config_path).resolve() == served:
                service = context.service
                service.reviewers = DelegatedReviewers(ConfiguredReviewers(roles), service.delegations)
                context.config = context.config.model_copy(update={"roles": fresh.roles})
        inner = self.slack.inner if isinstance(self.slack, DelegatedReviewers) else self.slack
        if isinstance(inner, SlackReviewers):
            inner.replace(roles)
        last = self.config or self.started
        changes = role_changes(last.roles, fresh.roles)
        said = ["roles: " + "; ".join(changes) if changes else "roles unchanged"]
        if self.inbox is not None and fresh.web is not None:
            ended = self.inbox.remap(fresh.web)
            if last.web is None or (last.web.subjects, last.web.emails) != (fresh.web.subjects, fresh.web.emails):
                said.append(f"web sign-in mappings changed ({ended} session(s) ended)")
        restart = _restart_needed(self.started, fresh)
        if restart:
            said.append(f"policy changes need a restart: {', '.join(restart)} changed and still apply as at start")
        self.config = fresh
        return "; ".join(said)

    async def _audit(self, outcome: str, detail: str) -> None:
        entry = AuditEntry(
            at=self.contexts.clock.now(), actor=self.actor, event=EVENT, outcome=outcome, detail=detail[:MAX_DETAIL]
        )
        try:
            await self.store.audit.append(entry)
        except EngineError as exc:
            log.error("hitl.yaml reload (%s) could not be audited: %s", outcome, exc.message)
