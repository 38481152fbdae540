"""Deploy files: the Dockerfile lints clean, the manifest parses and names exactly the scopes the code uses."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
# Web API methods the bot may call -> the bot scopes Slack requires for them (None: no scope needed).
SCOPES: dict[str, str | tuple[str, ...] | None] = {
    "chat_postMessage": "chat:write",
    "chat_update": "chat:write",
    "chat_postEphemeral": "chat:write",
    "views_open": None,
    "views_update": None,
    "usergroups_users_list": "usergroups:read",
    "users_info": "users:read",
    "auth_test": None,
    "views_publish": None,  # the Home tab: no scope needed
    "chat_getPermalink": None,  # the Home tab's links to cards: no scope needed
    "conversations_history": ("channels:history", "groups:history"),  # a card posted by a poster that died
}


def test_manifest_names_exactly_the_scopes_the_code_uses() -> None:
    manifest = yaml.safe_load((ROOT / "manifest.yaml").read_text())
    declared = set(manifest["oauth_config"]["scopes"]["bot"])
    code = "\n".join(p.read_text() for p in (ROOT / "bot").rglob("*.py") if "sandbox" not in p.parts)
    called = set(re.findall(r"\bclient\.([a-z]+_[A-Za-z_]+)\b", code))
    unknown = called - set(SCOPES)
    assert not unknown, f"add these methods to SCOPES: {unknown}"
    needed = set()
    for method in called:
        scopes = SCOPES[method]
        needed |= {scopes} if isinstance(scopes, str) else set(scopes or ())
    if "/hitl" in [c["command"] for c in manifest["features"]["slash_commands"]]:
        needed.add("commands")
    assert declared == needed
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    assert manifest["settings"]["interactivity"]["request_url"].endswith("/slack/events")
    # Exactly the events the listeners take, delivered to the same URL; the Home tab they publish is switched on.
    listened = set(re.findall(r'app\.event\("([a-z_]+)"\)', code))
    events = manifest["settings"]["event_subscriptions"]
    assert set(events["bot_events"]) == listened == {"app_home_opened"}
    assert events["request_url"].endswith("/slack/events")
    assert manifest["features"]["app_home"]["home_tab_enabled"] is True


def test_dockerfile_lints_clean_and_runs_as_non_root() -> None:
    hadolint = shutil.which("hadolint") or str(Path(__file__).resolve().parents[1] / ".venv" / "bin" / "hadolint")
    out = subprocess.run([hadolint, "--no-color", str(ROOT / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^USER 10001$", text, re.M) and "HEALTHCHECK" in text and "/healthz" in text
    assert '"hitl", "serve"' in text


def test_compose_has_redis_replicas_and_one_entry_point() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    assert services["hitl"]["environment"]["HITL_STORE"].startswith("${HITL_STORE:-redis://")  # Redis unless told
    assert services["hitl"]["deploy"]["replicas"] >= 2
    assert "ports" not in services["hitl"] and services["proxy"]["ports"] == ["3000:3000"]  # Slack's one URL
    caddyfile = compose["configs"]["caddyfile"]["content"]
    assert "dynamic a" in caddyfile and "name hitl" in caddyfile and "port 3000" in caddyfile
    assert all(service["restart"] == "unless-stopped" for service in services.values())
    assert services["hitl"]["env_file"] == [{"path": ".env", "required": False}]
    assert "--appendfsync" in services["redis"]["command"] and "always" in services["redis"]["command"]


def test_the_license_ships_and_docker_builds_from_a_clean_context() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]  # SPDX, PEP 639
    assert (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")
    assert re.search(r"^COPY .*\bLICENSE\b", (ROOT / "Dockerfile").read_text(), re.M)
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".venv", ".git", ".hitl"} <= ignored  # `docker build .` after `make install` sends neither


def test_the_image_installs_from_a_lock_that_pins_everything_the_serve_extra_needs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned: dict[str, Version] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            (spec,) = req.specifier  # exact: name==version, nothing looser
            assert spec.operator == "==", line
            pinned[canonicalize_name(req.name)] = Version(spec.version)
    extras = project["optional-dependencies"]
    for line in [*project["dependencies"], *extras["serve"], *extras["postgres"]]:
        req = Requirement(line)
        name = canonicalize_name(req.name)
        assert name in pinned, f"{req.name} is not in requirements.lock; regenerate it (see its header)"
        assert req.specifier.contains(pinned[name]), f"requirements.lock pins {name} {pinned[name]}, outside {req}"
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--requirement requirements.lock" in dockerfile and "--no-deps ." in dockerfile


def test_deploy_files_work_on_a_fresh_clone() -> None:
    """Compose mounts only files the clone has (a missing one would make Docker create a directory of that name),
    the image declares its data volume, and the manifest's comments and usage hint say what the code does."""
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    for service in compose["services"].values():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith((".", "/")):
                assert (ROOT / source).is_file(), f"compose mounts {source}, which a fresh clone lacks"
    # PostgreSQL instead of Redis: a profile that starts a server, and the store URL taken from the environment.
    postgres = compose["services"]["postgres"]
    assert postgres["profiles"] == ["postgres"] and any("postgres-data:" in v for v in postgres["volumes"])
    assert compose["services"]["hitl"]["environment"]["HITL_STORE"].startswith("${HITL_STORE:-redis://")
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'VOLUME ["/data"]' in dockerfile and "sqlite:////data/" in dockerfile
    for sources in re.findall(r"^COPY (.+) \S+$", dockerfile, re.M):  # `docker build` fails on a missing one
        for source in sources.split():
            assert (ROOT / source).exists(), f"the Dockerfile copies {source}, which the repository lacks"
    manifest_text = (ROOT / "manifest.yaml").read_text()
    manifest = yaml.safe_load(manifest_text)
    assert (
        manifest["settings"]["socket_mode_enabled"] is False and "keep socket_mode_enabled: true" not in manifest_text
    )
    from hitl.bot.listeners.commands import USAGE

    [command] = manifest["features"]["slash_commands"]
    hint = command["usage_hint"]
    for sub in re.findall(r"`/hitl (\w+(?: \w+)?)", USAGE):
        assert sub.split()[0] in hint and (not sub.startswith("trust ") or sub in hint), (sub, hint)
