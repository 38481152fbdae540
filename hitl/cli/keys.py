"""``hitl keys``: the Ed25519 keys ``hitl serve`` signs receipts with. ``new`` writes a key where only its owner
reads it; ``public`` writes a key's public half, the only part a key that no longer signs needs to be published.

A rotation takes two steps, so that no verifier ever meets a receipt signed by a key it has not fetched yet:

1. ``hitl keys new --out next.pem``; name it under ``receipts.next`` and restart ``hitl serve``: it is published,
   and does not sign.
2. After a wait longer than every verifier's cache of the published keys (:data:`ROTATION_WAIT`), make it
   ``key_file``, put the old key's public half (``hitl keys public``) under ``receipts.previous``, and restart.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hitl.cli.flags import FlagCommand, FlagGroup
from hitl.cli.options import JsonOpt

if TYPE_CHECKING:
    from hitl.cli.output import Out

__all__ = ["ROTATION_WAIT", "keys_app"]

ROTATION_WAIT = "15 minutes"
"""How long a published next key waits before it signs: longer than the 10 minutes Node's ``jose`` keeps a JWKS
by default, the longest of the common verifiers' caches (``hitl serve`` says 5 minutes, ``RemoteKeys`` keeps 5)."""

keys_app = typer.Typer(
    cls=FlagGroup,
    help="Keys: the Ed25519 key `hitl serve` signs receipts with, and rotating it in two steps.",
    no_args_is_help=True,
)

_Force = Annotated[bool, typer.Option("--force", help="Replace a file that exists.")]


@keys_app.command("new", cls=FlagCommand)
def keys_new(
    out_file: Annotated[
        Path, typer.Option("--out", help="Where to write the private key (PEM, readable by its owner only).")
    ] = Path("hitl-receipt-key.pem"),
    force: _Force = False,
    as_json: JsonOpt = False,
) -> None:
    """Write a new receipt signing key; prints its kid and what to put in hitl.yaml. To rotate to it: name it under
    receipts.next and restart hitl serve (published, not signing); after 15 minutes make it key_file, put the old
    key's public half (`hitl keys public`) under receipts.previous, and restart."""
    from hitl.cli.output import Out
    from hitl.receipts.signing import new_key_pem, public_kid  # the signing side: only this command and hitl serve

    out = Out(as_json=as_json)
    pem = new_key_pem()
    _write(out, out_file, pem, mode=0o600, force=force)  # also when --force replaced a file others could read
    kid = public_kid(pem)
    if out.json:
        out.emit({"key_file": str(out_file), "kid": kid})
        return
    out.text(("wrote ", "dim"), str(out_file), ("  kid ", "dim"), kid)
    out.text(("as a first key, in hitl.yaml (or HITL_RECEIPT_KEY holding the file's contents instead):", "bold"))
    out.text("    receipts:")
    out.text("      issuer: https://hitl.example.com")
    out.text(f"      key_file: {out_file}")
    out.text(("to rotate to it, in two steps:", "bold"))
    out.text(f"  1. name it under receipts.next ({out_file}) and restart hitl serve: published, not signing yet")
    out.text(f"  2. after {ROTATION_WAIT} (every verifier's cached keys hold it by then): make it key_file, drop next,")
    out.text("     put the old key's public half under receipts.previous (hitl keys public OLD.pem --out OLD.pub.pem),")
    out.text("     and restart hitl serve; drop previous once the receipts the old key signed have expired")


@keys_app.command("public", cls=FlagCommand)
def keys_public(
    key_file: Annotated[Path, typer.Argument(metavar="KEY", help="A key file (PEM), private or public.")],
    out_file: Annotated[Path, typer.Option("--out", help="Where to write its public half (PEM).")],
    force: _Force = False,
    as_json: JsonOpt = False,
) -> None:
    """Write the public half of a key: what receipts.previous names once the key no longer signs (only hitl serve
    may hold a private key; under production: true no other process starts while it can read one)."""
    from hitl.cli.output import Out
    from hitl.receipts.signing import KeyProblem, public_kid, public_pem

    out = Out(as_json=as_json)
    try:
        pem = key_file.read_bytes()
        public = public_pem(pem)
    except OSError as exc:
        out.error("cannot_read", f"cannot read {key_file}: {exc.strerror or exc}")
        raise typer.Exit(1) from None
    except KeyProblem as exc:
        out.error("not_a_key", f"{key_file}: {exc}")
        raise typer.Exit(1) from None
    _write(out, out_file, public, mode=0o644, force=force)
    kid = public_kid(public)
    if out.json:
        out.emit({"public_file": str(out_file), "kid": kid})
        return
    out.text(("wrote ", "dim"), str(out_file), ("  kid ", "dim"), kid)
    out.text(f"name {out_file} under receipts.previous in hitl.yaml, in place of {key_file}")


def _write(out: Out, path: Path, data: bytes, *, mode: int, force: bool) -> None:
    """Write ``data`` to ``path`` with ``mode``, never over a file that exists unless ``force``."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if force else os.O_EXCL)
    try:
        fd = os.open(path, flags, mode)
    except FileExistsError:
        out.error("file_exists", f"{path} exists; name another --out, or --force to replace it")
        raise typer.Exit(1) from None
    except OSError as exc:
        out.error("cannot_write", f"cannot write {path}: {exc.strerror or exc}")
        raise typer.Exit(1) from None
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, mode)  # the mode asked for, also when --force replaced a file with another
