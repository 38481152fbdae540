"""The documentation site builds strictly (every link and README section resolves), shows every API endpoint, and
the commands its own pages give run as written."""

from __future__ import annotations

import asyncio
import importlib
import itertools
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hitl.api.app import openapi_document
from hitl.engine.storage import open_store

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
ADAPTERS = (
    "hitl.adapters.strands",
    "hitl.adapters.langgraph",
    "hitl.adapters.openai_agents",
    "hitl.adapters.pydantic_ai",
)


def test_the_site_builds_strictly_with_every_page_in_the_nav(site: Path) -> None:
    config = yaml.load((DOCS / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)  # tags (!relative) as text
    listed = set(re.findall(r"[\w-]+\.md", str(config["nav"])))
    assert listed == {p.name for p in (DOCS / "pages").glob("*.md")}
    api = (site / "api" / "index.html").read_text()
    document = openapi_document()
    assert all(f"<code>{path}</code>" in api for path in document["paths"])  # the reference covers every path
    # Each request and response body is shown from the document: every schema has its section and field table.
    for name, schema in document["components"]["schemas"].items():
        assert f'id="{name.lower()}"' in api, name
        assert all(f"<code>{field}</code>" in api for field in schema.get("properties", {})), name
    assert 'Request body: <a href="#proposalrequest">ProposalRequest</a>' in re.sub(r"</?strong>", "", api)
    codes = [int(c) for c in re.findall(r"<td><code>(\d{3})</code></td>", api)]
    # Codes ascend within an operation: each drop starts the next operation's list, so the drops count them.
    starts = 1 + sum(1 for a, b in itertools.pairwise(codes) if b < a)
    assert starts == sum(len(item) for item in document["paths"].values()), "each operation's codes, in order"
    slack = (site / "slack" / "index.html").read_text()
    assert "chat:write" in slack and "usergroups:read" in slack  # the manifest itself, included
    # The Python API reference: every public name under the path users import, nothing under the internal ones.
    reference = (site / "reference" / "index.html").read_text()
    documented = set(re.findall(r'id="(hitl\.[\w.]+)"', reference))
    for module in ("hitl", "hitl.testing", "hitl.stores", "hitl.mcp", "hitl.temporal", *ADAPTERS):
        public = importlib.import_module(module).__all__
        missing = [name for name in public if f"{module}.{name}" not in documented]
        assert not missing, f"{module}: {missing} have no entry in the reference"
    assert not [i for i in documented if i.startswith(("hitl.engine", "hitl.bot", "hitl.sandbox"))]
    stores = (site / "stores" / "index.html").read_text()  # the example store and its test, included whole
    assert 'class</span><span class="w"> </span><span class="nc">TracedStore' in stores
    assert "--8" not in stores and "STORE_SUITES" in stores
    # Nothing the pages load comes from another host (fonts, scripts, styles, images): read offline, it is whole.
    loads = re.compile(r"<(?:link|script|img|iframe|source)\b[^>]*\b(?:href|src)=\"(https?:)?//", re.I)
    for page in [*site.rglob("*.html"), *site.rglob("*.css")]:
        text = page.read_text(errors="replace")
        found = loads.search(text) or re.search(r"url\((['\"]?)(https?:)?//", text)
        assert found is None, f"{page.relative_to(site)} loads {text[found.start() : found.start() + 160]}"


async def _an_empty_store(url: str) -> None:
    store = open_store(url)
    await store.ping()
    await store.close()


@pytest.mark.slow
def test_the_commands_on_the_docs_own_pages_run(tmp_path: Path) -> None:
    """Every `hitl` line of the pages' bash blocks runs as written, from a directory holding a copy of the examples,
    against a store of its own: exit 0, or the exit code the comment above it names (`(exit 4)`). A line that
    names an id the reader fills in (`apr_…`, `<reviewer>`) is left out: no page can know it."""
    commands: list[tuple[list[str], int]] = []
    for page in sorted((DOCS / "pages").glob("*.md")):
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(), re.S):
            expected = 0
            for line in block.splitlines():
                if line.startswith("#"):
                    named = re.search(r"\(exit (\d)\)", line)
                    expected = int(named.group(1)) if named else 0
                elif line.startswith("hitl "):
                    argv = shlex.split(line.split("  #")[0])
                    if not any("…" in arg or "<" in arg for arg in argv):
                        commands.append((argv, expected))
                    expected = 0
    assert len(commands) >= 5, commands
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {**os.environ, "HITL_STORE": f"sqlite:///{tmp_path}/d.db", "HITL_CONFIG": "", "COLUMNS": "120"}
    asyncio.run(_an_empty_store(env["HITL_STORE"]))  # read commands need a store to read, and never create one
    for argv, expected in commands:
        done = subprocess.run(
            [sys.executable, "-m", "hitl", *argv[1:]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == expected, (argv, done.stderr)


def test_every_slack_setting_is_documented() -> None:
    """Each key of ``slack:`` in hitl.yaml, and each environment variable ``hitl serve`` reads for Slack, appears in
    the Slack page or the operations page."""
    from hitl.bot.settings import BotSettings
    from hitl.engine.config.hitl_yaml import NotifySpec

    pages = (ROOT / "docs" / "pages" / "slack.md").read_text() + (ROOT / "docs" / "pages" / "operations.md").read_text()
    missing = [f"slack.{key}" for key in NotifySpec.model_fields if f"  {key}:" not in pages]
    for name in ("notify",):  # the channel keys the notifier itself looks up
        if f"    {name}:" not in pages:
            missing.append(f"slack.channels.{name}")
    missing += [env.upper() for env in BotSettings.model_fields if env.upper() not in pages]
    assert missing == []


def test_every_oversight_and_alerts_setting_is_documented() -> None:
    """Each key of ``oversight:`` and ``alerts:`` (and of an alert rule), and each figure an alert can watch, appears
    in the Oversight page."""
    from hitl.engine.config.oversight import OversightSpec
    from hitl.engine.domain.alerts import AlertFigure, AlertRule, AlertsSpec
    from hitl.engine.domain.practice import Defect, PracticeSpec
    from hitl.engine.domain.spot_checks import SpotCheckSpec

    page = (ROOT / "docs" / "pages" / "oversight.md").read_text()
    keys = [*OversightSpec.model_fields, *SpotCheckSpec.model_fields, *PracticeSpec.model_fields, *Defect.model_fields]
    keys += [*AlertsSpec.model_fields, *AlertRule.model_fields]
    missing = [key for key in keys if f"{key}:" not in page]
    missing += [str(f) for f in AlertFigure if str(f) not in page]
    assert missing == []


def test_code_blocks_fit_88_columns() -> None:
    """Every code block of the README and the site's pages, and every file a page shows whole, is at most 88
    columns wide: nothing scrolls sideways, and no trailing comment hides past the edge."""
    wide: list[str] = []
    texts = [ROOT / "README.md", *sorted((DOCS / "pages").glob("*.md"))]
    for path in texts:
        text = path.read_text()
        for block in re.findall(r"^\s*```[^\n]*\n(.*?)^\s*```", text, re.S | re.M):
            wide += [f"{path.name}: {line}" for line in block.splitlines() if len(line) > 88]
        for included in re.findall(r'^--8<-- "([^":]+)"$', text, re.M):  # whole files shown as code
            if included.endswith(".md"):
                continue  # prose, wrapped by the page
            lines = (ROOT / included).read_text().splitlines()
            wide += [f"{included}: {line}" for line in lines if len(line) > 88]
    assert wide == [], "\n".join(wide)


_COMMENT = re.compile(r"(?:^|\s)(#|//|--)(?:\s|$)")
_ENDS_A_THOUGHT = tuple(".:!?)`\"'…")
_LEADS_ON = frozenset(
    "a an the and or but nor to of in on at by for from with without inside into than that which who whose would "
    "could should may must can will is are be its their your every each as when if so not no like via per".split()
)
"""Words no whole thought ends on: a comment ending on one goes on in the next line."""


def _comment(line: str) -> tuple[int, str] | None:
    """Where a line's comment starts (its column) and its text; None without one. A trailing comment stands two
    spaces after its code, as ruff and the pages write it, so `#` inside code (a URL's fragment) is not one."""
    for m in _COMMENT.finditer(line):
        before = line[: m.start(1)]
        if before.strip() and not before.endswith("  "):
            continue
        return m.start(1), line[m.end(1) :].strip()
    return None


def _broken(first: str, then: str) -> bool:
    """Whether ``then`` (a comment line) carries on the thought ``first``'s comment left unfinished."""
    a, b = _comment(first), _comment(then)
    if a is None or b is None or then[: b[0]].strip() or not a[1] or not b[1]:
        return False
    last_word = a[1].rsplit(None, 1)[-1].lower()
    if a[1].endswith((",", "/")) or last_word in _LEADS_ON:
        return True  # the first hangs, whatever follows
    if a[0] != b[0]:  # a trailing comment, then a comment line of its own: a new thought
        return False
    return not a[1].endswith(_ENDS_A_THOUGHT) and (b[1][0].islower() or b[1][0].isdigit() or b[1][0] in "(`")


def test_comments_in_code_blocks_stay_whole() -> None:
    """A comment in a code block of the README or the site's pages says its thought on one line: one broken across
    lines to fit 88 columns (the site wraps long lines at the page's edge, mid-word) reads as two half-thoughts,
    and the second as a comment on the next line of code. Shorten it, or make it two whole sentences."""
    broken: list[str] = []
    for path in [ROOT / "README.md", *sorted((DOCS / "pages").glob("*.md"))]:
        text = path.read_text()
        shown = [(path.name, block) for block in re.findall(r"^\s*```[^\n]*\n(.*?)^\s*```", text, re.S | re.M)]
        for included in re.findall(r'^--8<-- "([^":]+)"$', text, re.M):  # whole files shown as code
            if not included.endswith(".md"):
                shown.append((included, (ROOT / included).read_text()))
        for name, block in shown:
            lines = block.splitlines()
            broken += [f"{name}: {a.strip()} / {b.strip()}" for a, b in itertools.pairwise(lines) if _broken(a, b)]
    assert broken == [], "\n".join(broken)


def test_the_slack_setup_agrees_with_the_manifest_and_a_pip_install() -> None:
    """The setup steps count the manifest's URLs as it has them, and give paths a pip user has (`hitl init` writes
    them): no step sends a reader to the repository's examples/ folder as the only way."""
    urls = re.findall(r"https://hitl\.example\.com/\S+", (ROOT / "manifest.yaml").read_text())
    page = (DOCS / "pages" / "slack.md").read_text()
    steps = page[: page.index("What reviewers see")]
    said = {2: "two", 3: "three", 4: "four"}[len(urls)]
    assert f"its {said} URLs" in steps
    assert "hitl init refund --example refund" in steps
    assert re.findall(r"(?<![\w/])examples/refund/\S*", steps) == ["examples/refund/`)."]  # named as the clone's copy
    for path in re.findall(r"\brefund/(?:hitl|workflow)\.\w+", steps):  # what `hitl init` writes
        assert (ROOT / "hitl" / "demo" / path).exists(), path


def test_every_web_inbox_setting_is_documented() -> None:
    """Each key of ``web:`` and ``web.oidc:`` in hitl.yaml appears in the Web inbox page's table."""
    from hitl.engine.config.web import OidcSpec, WebSpec

    page = (ROOT / "docs" / "pages" / "web.md").read_text()
    assert [key for key in [*WebSpec.model_fields, *OidcSpec.model_fields] if f"| `{key}:` |" not in page] == []


def test_every_email_setting_is_documented() -> None:
    """Each key of ``email:`` and ``contacts:`` in hitl.yaml appears in the E-mail page's table or text."""
    from hitl.engine.config.email import ContactSpec, EmailSpec

    page = (ROOT / "docs" / "pages" / "email.md").read_text()
    keys = [field.alias or name for name, field in EmailSpec.model_fields.items()]
    assert [key for key in keys if f"| `{key}:` |" not in page] == []
    assert all(f"{{{key}: …}}" in page for key in ContactSpec.model_fields)
