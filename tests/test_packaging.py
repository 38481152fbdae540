"""The built wheel works on its own, in a fresh virtual environment, away from the checkout.

Installed bare (what an agent process needs), it proposes, pauses and resumes runs from the CLI without Slack,
aiohttp or Prometheus, and `hitl demo` says which extra it needs. With the `serve` extra, `hitl demo --scripted`
runs the bundled refund example end to end. Dependencies come from the package index (the CI machine has one).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_wheel_installs_and_runs_in_a_fresh_venv(tmp_path: Path) -> None:
    # Built from a copy: setuptools writes build/ and *.egg-info beside the sources, and the checkout stays clean.
    source = tmp_path / "src"
    skip = shutil.ignore_patterns(".git", ".venv", ".hitl", "build", "dist", "artifacts", "*.egg-info", ".*_cache")
    shutil.copytree(ROOT, source, symlinks=True, ignore=skip)
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path / "dist"), str(source)],
        cwd=tmp_path,
        env=dict(os.environ),
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("hitl_gate-*.whl")
    venv = tmp_path / "venv"
    # Without a pip of its own (ensurepip cost ~6 s of CPU a run); this pip installs into it (--python), and each
    # install leaves bytecode to the first run that imports a module (compiling every dependency's every module
    # cost ~3 s more). What is proved stays: the wheel and its declared dependencies, alone in a fresh venv.
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path, env=dict(os.environ))
    assert made.returncode == 0, made.stderr
    bin_ = venv / "bin"
    pip = [sys.executable, "-m", "pip", "--python", str(bin_ / "python"), "install", "--quiet", "--no-compile"]
    # Nothing of the checkout leaks in: no PYTHONPATH, run from an empty folder.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("HITL_")}
    env["PATH"] = f"{bin_}:{env['PATH']}"
    work = tmp_path / "work"
    work.mkdir()

    bare = _run([*pip, str(wheel)], cwd=work, env=env)
    assert bare.returncode == 0, bare.stderr
    for module in ("aiohttp", "slack_bolt", "prometheus_client"):
        probe = _run([str(bin_ / "python"), "-c", f"import {module}"], cwd=work, env=env)
        assert probe.returncode != 0, f"{module} came with the bare install"
    version = _run([str(bin_ / "hitl"), "--version"], cwd=work, env=env)
    assert version.returncode == 0 and "0.1.0" in version.stdout, version.stderr

    example = _run(
        [str(bin_ / "python"), "-c", "from hitl.demo.examples import refund_example; print(refund_example())"],
        cwd=work,
        env=env,
    )
    assert example.returncode == 0 and str(venv) in example.stdout, example.stderr
    written = _run([str(bin_ / "hitl"), "init", "--example", "refund", "refund"], cwd=work, env=env)
    assert written.returncode == 0, written.stderr  # pip first: the example from the wheel alone
    written_files = {p.name for p in (work / "refund").iterdir()}
    assert written_files == {"hitl.yaml", "workflow.yaml", "tools.py", "shop_consequences.py"}
    folder = Path(example.stdout.strip())
    run_env = {**env, "HITL_STORE": f"sqlite:///{work}/hitl.db", "SHOP_DB": str(work / "shop.db")}
    paused = _run(
        [
            str(bin_ / "hitl"),
            "run",
            str(folder / "workflow.yaml"),
            "--config",
            str(folder / "hitl.yaml"),
            "--var",
            "order_id=78291",
            "--var",
            "amount=120",
            "--json",
        ],
        cwd=work,
        env=run_env,
    )
    assert paused.returncode == 4, paused.stdout + paused.stderr  # paused for a person, as the policy says
    approval_id = json.loads(paused.stdout)["approval_id"]
    resumed = _run(
        [
            str(bin_ / "hitl"),
            "resume",
            approval_id,
            "--approve",
            "--as",
            "U_SUPPORT1",
            "--config",
            str(folder / "hitl.yaml"),
            "--json",
        ],
        cwd=work,
        env=run_env,
    )
    assert resumed.returncode == 0 and json.loads(resumed.stdout)["status"] == "completed", resumed.stderr

    refused = _run([str(bin_ / "hitl"), "demo", "--scripted"], cwd=work, env=env)
    assert refused.returncode == 1 and "pip install 'hitl-gate[serve]'" in refused.stderr, refused.stderr

    full = _run([*pip, f"{wheel}[serve]"], cwd=work, env=env)
    assert full.returncode == 0, full.stderr
    demo = _run([str(bin_ / "hitl"), "demo", "--scripted"], cwd=work, env=env, timeout=300)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]


@pytest.mark.slow
def test_the_sdist_holds_what_builds_the_wheel_and_reads_well_on_the_index(tmp_path: Path) -> None:
    """The source distribution has the package, README, licence and changelog and no half of the tests; its metadata
    names the project's URLs, classifiers, keywords and authors; the long description links only absolute URLs (a
    relative image is broken on the index); the changelog follows Keep a Changelog and names the version."""
    import re
    import tarfile
    import tomllib

    source = tmp_path / "src"
    skip = shutil.ignore_patterns(".git", ".venv", ".hitl", "build", "dist", "artifacts", "*.egg-info", ".*_cache")
    shutil.copytree(ROOT, source, symlinks=True, ignore=skip)
    # As a release builds it: in an isolated environment with the build requirements pyproject.toml names.
    command = [sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path / "dist"), str(source)]
    built = _run(command, cwd=tmp_path, env=dict(os.environ), timeout=600)
    assert built.returncode == 0, built.stderr
    (sdist,) = (tmp_path / "dist").glob("hitl_gate-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = [n.split("/", 1)[1] for n in tar.getnames() if "/" in n]
        member = tar.extractfile(f"{tar.getnames()[0].split('/')[0]}/PKG-INFO")
        assert member is not None
        info = member.read().decode()
    assert {"README.md", "LICENSE", "docs/CHANGELOG.md", "pyproject.toml", "hitl/engine/service.py"} <= set(names)
    assert not [n for n in names if n.startswith(("tests/", "bench/"))], names
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert f"Version: {project['version']}" in info
    for field in ("Project-URL: Homepage", "Project-URL: Changelog", "Classifier: Typing :: Typed", "Keywords:"):
        assert field in info, field
    assert "Author: The hitl maintainers" in info
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    assert links and all(link.startswith("https://") for link in links), links
    changelog = (ROOT / "docs" / "CHANGELOG.md").read_text()
    versions = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", changelog, re.M)
    assert versions[0] == ("Unreleased", "") and (project["version"], versions[1][1]) == versions[1], versions
    kinds = set(re.findall(r"^### (.+)$", changelog, re.M))
    assert kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, kinds
