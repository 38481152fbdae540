"""A service that only checks receipts needs neither the engine nor its dependencies: in a fresh virtual environment
holding only joserfc and rfc8785, hitl's ``__init__`` and ``receipts`` package check a receipt hitl signed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

from joserfc.jwk import OKPKey

from hitl.receipts import args_sha256
from hitl.receipts.signing import SigningKeys, new_key_pem
from tests.bot.conftest import ROOT

CHECK = """
import json, sys
from hitl.receipts import KeySet, ReceiptError, verify
receipt, jwks, args = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
claims = verify(receipt, tool="pay", args=args, keys=KeySet(jwks), audience="payments")
try:
    verify(receipt, tool="pay", args={**args, "amount": 1}, keys=KeySet(jwks), audience="payments")
except ReceiptError as exc:
    refused = str(exc.code)
heavy = ("pydantic", "redis", "aiohttp", "slack_sdk")
loaded = sorted(m.split(".")[0] for m in sys.modules if m.split(".")[0] in heavy)
print(json.dumps({"jti": claims["jti"], "refused": refused, "loaded": loaded,
                  "engine": any(m.startswith("hitl.engine") for m in sys.modules)}))
"""


def test_a_fresh_environment_with_two_libraries_checks_a_receipt(tmp_path: Path) -> None:
    env_dir, code = tmp_path / "venv", tmp_path / "code" / "hitl"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--disable-pip-version-check"]
    installed = subprocess.run([*pip, "joserfc>=1.8", "rfc8785>=0.1.4"], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    code.mkdir(parents=True)
    shutil.copy(ROOT / "hitl" / "__init__.py", code / "__init__.py")
    shutil.copytree(ROOT / "hitl" / "receipts", code / "receipts", ignore=shutil.ignore_patterns("__pycache__"))

    keys = SigningKeys(OKPKey.import_key(new_key_pem()))
    args = {"to": "V-1", "amount": 120}
    now = int(time.time())
    receipt = keys.sign(
        {
            "iss": "https://hitl.example.com",
            "sub": "apr_1",
            "jti": "rct_alone",
            "iat": now,
            "exp": now + 300,
            "tool": "pay",
            "args_sha256": args_sha256(args),
            "basis": "approval",
            "aud": "payments",
        }
    )
    out = subprocess.run(
        [str(python), "-c", CHECK, receipt, json.dumps(keys.jwks()), json.dumps(args)],
        cwd=tmp_path / "code",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"jti": "rct_alone", "refused": "wrong_arguments", "loaded": [], "engine": False}
