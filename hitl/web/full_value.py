"""One argument in full on the web inbox, as Slack's "Show in full" view shows it: typed, every hidden character
marked, every warning, paged at the same size (a page never splits a grapheme). Who may read it is decided by the
caller (:meth:`hitl.web.app.WebInbox.full_value`), with the same rule as Slack's view."""

from __future__ import annotations

from html import escape

from hitl.bot.views.full_value import PAGE_CHARS
from hitl.engine.domain.display import pages, show
from hitl.engine.domain.hashing import short_hash
from hitl.engine.domain.models import Approval

__all__ = ["full_value_page"]


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def full_value_page(a: Approval, index: int, page: int) -> tuple[str, str] | None:
    """The title and body (escaped HTML) of page ``page`` of argument ``index`` of ``a``; None when ``a`` has no
    argument at ``index``. A page past the last shows the last."""
    names = list(a.execute_args)
    if not 0 <= index < len(names):
        return None
    name = names[index]
    shown = show(a.execute_args[name])
    parts = pages(shown.text, PAGE_CHARS)
    page = min(max(page, 0), len(parts) - 1)
    here = f"/inbox/approvals/{_e(a.id)}"
    links = [f'<a href="{here}">Back to the approval</a>']
    if page > 0:
        links.append(f'<a href="{here}/values/{index}?page={page - 1}">Previous page</a>')
    if page < len(parts) - 1:
        links.append(f'<a href="{here}/values/{index}?page={page + 1}">Next page</a>')
    warnings = "".join(f'<li class="warn">{_e(w)}</li>' for w in shown.warnings)
    body = (
        f'<h1>{_e(name)} <span class="kind">{_e(shown.kind)}</span></h1>'
        f'<p class="meta"><code>{_e(a.tool)}</code> · approval <code>{_e(a.id)}</code> v{a.version} · action hash '
        f"{_e(short_hash(a.action_hash))}<br>Page {page + 1} of {len(parts)} · {shown.length:,} characters in the "
        "value</p>"
        + (f'<ul class="warnings">{warnings}</ul>' if warnings else "")
        + f'<pre class="value full">\n{_e(parts[page])}</pre><p class="pages">{" · ".join(links)}</p>'
    )
    return f"{name} in full", body
