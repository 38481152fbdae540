"""The web inbox's list as server-rendered HTML: a filter form a keyboard works through, what waits on the reviewer
(each with why it ranks there) and the decided history, one list item per approval that wraps at any width (no
table to scroll sideways on a phone). Every text from an approval is escaped."""

from __future__ import annotations

from html import escape
from urllib.parse import urlencode

from .inbox import InboxQuery, InboxRow, InboxView
from .pages import _utc, layout

__all__ = ["inbox_page"]

_STATUSES = ["any", "pending", "decided", "approved", "rejected", "expired", "cancelled", "superseded", "executed"]
_TIERS = ["", "auto", "notify", "approve", "escalate"]


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _field(name: str, label: str, value: str | None, kind: str = "text") -> str:
    return (
        f'<span class="pair"><label for="f-{name}">{_e(label)}</label>'
        f'<input id="f-{name}" name="{name}" type="{kind}" value="{_e(value or "")}"></span>'
    )


def _select(name: str, label: str, options: list[str], chosen: str) -> str:
    items = "".join(
        f'<option value="{_e(o)}"{" selected" if o == chosen else ""}>{_e(o or "any")}</option>' for o in options
    )
    return (
        f'<span class="pair"><label for="f-{name}">{_e(label)}</label>'
        f'<select id="f-{name}" name="{name}">{items}</select></span>'
    )


def _filters(q: InboxQuery) -> str:
    return (
        '<form method="get" action="/inbox" class="filters" role="search" aria-label="Filter approvals">'
        + _field("id", "Approval id", q.id)
        + _field("tool", "Tool", q.tool)
        + _select("tier", "Tier", _TIERS, q.tier.value if q.tier else "")
        + _field("requester", "Requester", q.requester)
        + _field("reviewer", "Decided by", q.reviewer)
        + _select("status", "Status", _STATUSES, str(q.status))
        + _field("since", "Created from", q.since.isoformat() if q.since else None, "date")
        + _field("until", "Created until", q.until.isoformat() if q.until else None, "date")
        + '<button type="submit">Show</button> <a href="/inbox">Clear</a></form>'
    )


def _links(r: InboxRow) -> str:
    slack = f' · <a href="{_e(r.permalink)}">In Slack</a>' if r.permalink else ""
    group = ' <span class="group">group</span>' if r.group else ""
    return f"{group}{slack}"


def _waiting_item(r: InboxRow) -> str:
    a = r.approval
    # The link first in the item, as before: the list reads as one link per approval
    return (
        f'<li><a href="/inbox/approvals/{_e(a.id)}">{_e(r.view.heading)}</a> <code>{_e(a.id)}</code>'
        f'{_links(r)}<br><span class="why">{_e(r.why or "")}</span></li>'
    )


def _history_item(r: InboxRow) -> str:
    a = r.approval
    by = ", ".join(f"{d.kind.value} by {d.reviewer}" for d in a.decisions) or "no reviewer decided"
    return (
        f'<li class="decided" data-id="{_e(a.id)}"><a href="/inbox/approvals/{_e(a.id)}">{_e(r.view.heading)}</a> '
        f'<code>{_e(a.id)}</code>{_links(r)}<br><span class="status">{_e(a.status.value)}</span> · '
        f'<span class="by">{_e(by)}</span> · {_e(a.tool)} · {_e(a.tier.value)} · asked by {_e(a.requester)} · '
        f"{_e(_utc(a.created_at))}</li>"
    )


def inbox_page(view: InboxView, q: InboxQuery, *, reviewer: str, csrf: str) -> str:
    """The inbox: the filters, what waits on ``reviewer``, the decided history and a link to its next page."""
    parts = [_filters(q)]
    if view.searched and not (view.waiting or view.history):
        parts.append(f'<p class="note">No approval {_e(q.id)} that you may read.</p>')
    if view.waiting:
        parts.append(f"<h1>Waiting on you</h1><ul class='inbox'>{''.join(map(_waiting_item, view.waiting))}</ul>")
    elif (q.status == "pending" or (q.status == "any" and q.cursor is None)) and not view.searched:
        parts.append("<h1>Nothing waits on you</h1>")
    if (q.status != "pending" and not view.searched) or view.history:
        items = "".join(map(_history_item, view.history))
        parts.append(f"<h2>Decided</h2><ul class='history'>{items}</ul>" if items else "<h2>Nothing decided here</h2>")
    if view.cursor:
        keep = q.model_dump(mode="json", exclude_none=True, exclude={"cursor"})
        keep = {k: v for k, v in keep.items() if not (k == "status" and v == "any") and not (k == "limit" and v == 50)}
        more = "More" if q.status == "pending" else "Older"
        parts.append(f'<p><a href="/inbox?{_e(urlencode({**keep, "cursor": view.cursor}))}" rel="next">{more}</a></p>')
    return layout("Web inbox", "".join(parts), reviewer=reviewer, csrf=csrf)
