"""Key custody: whether a process other than ``hitl serve`` could read a key whose receipts ``hitl serve``'s published
keys verify. Under ``production: true`` such a process does not start: an agent holding one could sign its own
receipts, which is what they guard against."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from hitl.engine.receipts.spec import ReceiptsSpec

__all__ = ["signing_key_within_reach"]


def signing_key_within_reach(spec: ReceiptsSpec, environ: Mapping[str, str], *, base: Path | None = None) -> str | None:
    """Where this process could read a key that signs, or could sign, receipts ``hitl serve``'s keys verify (relative
    paths read from ``base``); None when it can read none. Any key that is published counts: the signing one (its
    ``key_env`` variable, set even when ``key_file`` is named, or a readable ``key_file``), and a readable ``next``
    or ``previous`` file unless it holds only public keys."""
    if environ.get(spec.key_env):
        return f"the environment variable {spec.key_env}"
    if spec.key_file is not None and _readable(spec.key_file, base) is not None:
        return f"the key file {_path(spec.key_file, base)}"
    published = [("receipts.next", spec.next)] if spec.next is not None else []
    older = [*(("receipts.previous", p) for p in spec.previous), *(("receipts.retired", p) for p in spec.retired)]
    for role, name in [*published, *older]:
        held = _readable(name, base)
        if held is not None and not _only_public(held):
            return (
                f"the private key under {role}, {_path(name, base)}: keep it where only hitl serve reads it, or name "
                f"its public half there instead (`hitl keys public {name} --out <file>`)"
            )
    return None


_PUBLIC_PEM = re.compile(rb"-----BEGIN PUBLIC KEY-----[A-Za-z0-9+/=\s]*-----END PUBLIC KEY-----")


def _only_public(data: bytes) -> bool:
    """Whether ``data`` holds public keys (PEM) and nothing else; anything else (a private key in any form, or
    what cannot be told apart from one) counts as a key that signs."""
    rest = _PUBLIC_PEM.sub(b"", data)
    return rest != data and not rest.strip()


def _path(name: str, base: Path | None) -> Path:
    path = Path(name)
    return path if path.is_absolute() or base is None else base / path


def _readable(name: str, base: Path | None) -> bytes | None:
    """The contents of the file ``name`` when this process can read it."""
    try:
        return _path(name, base).read_bytes()
    except OSError:
        return None
