"""Receipt benchmark: what issuing a receipt adds to an execution claim inside `hitl serve`, on SQLite, Redis and
PostgreSQL, in one run with interleaved rounds.

Each round claims a batch of executions as `hitl serve` does with a receipt (its claims built, signed with Ed25519
while the claim travels to the store, its issue recorded and audited in the claim's atomic step, which also refuses a
withdrawn approval) and a batch with the store's claim alone, on the same store. The floor is Ed25519's own signing of
a message of a receipt's size (the `cryptography` package, which joserfc signs with). Target: a receipt adds at most
0.2 ms to a claim (the median difference). Run with `make bench` or
`.venv/bin/python bench/receipt_bench.py [--rounds N]`.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import heading, row, spread  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402
from every_store import every_store  # noqa: E402
from joserfc.jwk import OKPKey  # noqa: E402
from report import bar, chart, run_reported  # noqa: E402

from hitl.engine.ports import Store  # noqa: E402
from hitl.engine.receipts.issuing import ReceiptIssuer, SignedClaims  # noqa: E402
from hitl.engine.receipts.spec import ReceiptsSpec  # noqa: E402
from hitl.receipts.signing import SigningKeys, new_key_pem  # noqa: E402
from hitl.testing import FakeClock, make_approval  # noqa: E402

BATCH = 50
"""Claims per contender per round (each a new execution)."""


async def claims(store: Store, signed: SignedClaims | None, clock: FakeClock, tag: str) -> float:
    """Milliseconds per claim over a batch of new executions: ``hitl serve``'s own claim (``signed``: its receipt
    signed while the claim travels to the store, and recorded by it), or the store's claim alone."""
    approval = make_approval(now=clock.now(), args={"to": "V-1", "amount": 120, "memo": "invoice 2026-118"})
    t0 = time.perf_counter()
    for i in range(BATCH):
        key = f"call:{tag}{i}"
        if signed is None:
            await store.ledger.claim(key, action_hash="h", holder="w", now=clock.now(), lease=300)
        else:
            got = await signed.claim(approval, approval.args, key=key, action_hash="h", holder="w", lease=300)
            assert got.receipt is not None
    return (time.perf_counter() - t0) * 1000 / BATCH


def ed25519_floor(message: bytes) -> float:
    """Milliseconds per Ed25519 signature of ``message`` alone."""
    key = Ed25519PrivateKey.generate()
    t0 = time.perf_counter()
    for _ in range(BATCH):
        key.sign(message)
    return (time.perf_counter() - t0) * 1000 / BATCH


async def main(rounds: int) -> None:
    clock = FakeClock()
    spec = ReceiptsSpec(issuer="https://hitl.example.com")
    keys = SigningKeys(OKPKey.import_key(new_key_pem()))
    issuer = ReceiptIssuer(spec, keys, clock)
    sample = issuer.issue(make_approval(now=clock.now()), {"to": "V-1", "amount": 120}, key="call:x", holder="w")
    assert sample is not None
    message = sample[0].rsplit(".", 1)[0].encode()  # what Ed25519 signs: the header and the claims
    with every_store("rb") as made:
        for name, new in made.items():
            store = new()
            await store.migrate()
            signed = SignedClaims(issuer, store)
            samples: dict[str, list[float]] = {"claim": [], "claim with receipt": [], "floor": []}
            for r in range(rounds):  # interleaved: every measure meets the same machine
                samples["claim"].append(await claims(store, None, clock, f"p{r}_"))
                samples["claim with receipt"].append(await claims(store, signed, clock, f"r{r}_"))
                samples["floor"].append(ed25519_floor(message))
            await store.close()
            heading(f"an execution claim on {name} ({rounds} rounds of {BATCH}, min / median / max, ms per claim)")
            row("claim (no receipt)", spread(samples["claim"], "{:.3f}"))
            row("claim with a receipt (signed, recorded)", spread(samples["claim with receipt"], "{:.3f}"))
            row("floor: Ed25519 signing alone", spread(samples["floor"], "{:.3f}"))
            added = statistics.median(samples["claim with receipt"]) - statistics.median(samples["claim"])
            row("what a receipt adds to a claim (median)", f"{added:.3f} ms", "<= 0.2 ms", added <= 0.2)
            chart(
                f"An execution claim on {name}, ms",
                "ms",
                [
                    bar("claim with a receipt", samples["claim with receipt"]),
                    bar("claim (peer)", samples["claim"]),
                    bar("Ed25519 signing (floor)", samples["floor"], floor=True),
                ],
            )


if __name__ == "__main__":
    run_reported("receipts", "What a receipt costs an execution claim", __doc__, main, rounds=15)
