"""``hitl keys new``: a new Ed25519 key for signing receipts, written where only ``hitl serve`` reads it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from hitl.cli.flags import FlagCommand, FlagGroup
from hitl.cli.options import JsonOpt
from hitl.cli.output import Out

__all__ = ["keys_app"]

keys_app = typer.Typer(
    cls=FlagGroup, help="Keys: the Ed25519 key `hitl serve` signs receipts with.", no_args_is_help=True
)


@keys_app.command("new", cls=FlagCommand)
def keys_new(
    out_file: Annotated[
        Path, typer.Option("--out", help="Where to write the private key (PEM, readable by its owner only).")
    ] = Path("hitl-receipt-key.pem"),
    force: Annotated[bool, typer.Option("--force", help="Replace a file that exists.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write a new receipt signing key; prints its kid and what to put in hitl.yaml. To rotate, keep the old file
    under receipts.previous until the receipts it signed have expired."""
    from hitl.receipt_keys import new_key_pem, public_kid  # the signing side: only this command and hitl serve

    out = Out(as_json=as_json)
    pem = new_key_pem()
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if force else os.O_EXCL)
    try:
        fd = os.open(out_file, flags, 0o600)
    except FileExistsError:
        out.error("file_exists", f"{out_file} exists; name another --out, or --force to replace it")
        raise typer.Exit(1) from None
    except OSError as exc:
        out.error("cannot_write", f"cannot write {out_file}: {exc.strerror or exc}")
        raise typer.Exit(1) from None
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    os.chmod(out_file, 0o600)  # also when --force replaced a file that was readable by others
    kid = public_kid(pem)
    if out.json:
        out.emit({"key_file": str(out_file), "kid": kid})
        return
    out.text(("wrote ", "dim"), str(out_file), ("  kid ", "dim"), kid)
    out.text(("in hitl.yaml (or set HITL_RECEIPT_KEY to the file's contents instead of key_file):", "bold"))
    out.text("    receipts:")
    out.text("      issuer: https://hitl.example.com")
    out.text(f"      key_file: {out_file}")
