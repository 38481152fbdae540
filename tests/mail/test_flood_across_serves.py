"""The e-mail cap across real replicas: two `hitl serve` processes on one SQLite file, one real SMTP server
(aiosmtpd), and a flood of 300 approvals of one group: each person gets at most five messages in ten minutes in
all, not five from each process, because the cap is kept in the store they share."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import aiohttp

from hitl.engine.clocks import SystemClock
from hitl.engine.storage import open_store
from hitl.sandbox.server import start_emulator
from hitl.testing import make_approval
from tests.bot.conftest import CONFIG, serve_env, spawn_serve, wait_healthy, workspace
from tests.mail.smtp_server import smtp_server
from tests.ports import free_port
from tests.processes import stopped
from tests.refund_config import write_refund_config
from tests.waiting import eventually

FLOOD = 300
CLOCK = SystemClock()
"""The clock the `hitl serve` processes read (the system's), for the approvals this test files beside them."""
MAIL = (
    "\nweb: {public_url: 'https://hitl.example.com', oidc: {issuer: 'https://id.example.com', client_id: hitl}}\n"
    # Paced to at most 10 messages' worth of jobs a pass (its burst), so the flood reaches the cap over many passes
    # of both processes rather than in one digest each.
    "email: {smtp_url: 'smtp://127.0.0.1:%d', from: hitl@example.com, tools: [refund], pace: 0.01}\n"
    "contacts: {U_SUPPORT1: {email: s1@example.com}, U_SUPPORT2: {email: s2@example.com}, "
    "U_FIN1: {email: f1@example.com}}\n"
)


async def sent_by(port: int) -> float:
    """The messages the `hitl serve` on ``port`` handed to the SMTP server, by its /metrics."""
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as r:
        text = await r.text()
    return sum(
        float(n) for n in re.findall(r'^hitl_mail_messages_total\{[^}]*outcome="sent"[^}]*\} (\S+)$', text, re.M)
    )


async def test_a_flood_across_two_serve_processes_sends_each_person_at_most_five_messages(tmp_path: Path) -> None:
    with smtp_server() as box:
        state = workspace()
        emulator = await start_emulator(state)
        config = write_refund_config(tmp_path / "hitl.yaml", CONFIG.read_text() + MAIL % box.port)
        url = f"sqlite:///{tmp_path}/hitl.db"
        env = serve_env(
            state,
            emulator,
            store=url,
            config=config,
            SHOP_DB=str(tmp_path / "shop.db"),
            HITL_OIDC_CLIENT_SECRET="unused",
        )
        ports = [free_port(), free_port()]
        procs: list[subprocess.Popen[bytes]] = []
        store = open_store(url)
        try:
            for i, port in enumerate(ports):
                procs.append(spawn_serve(env, tmp_path, port, log=f"serve-{i}.log"))
                await wait_healthy(port, procs[-1])
            for i in range(FLOOD):  # like calls of one agent: one group (their cards share a group card)
                await store.approvals.create(make_approval(now=CLOCK.now(), key=f"flood{i}"))

            async def queued() -> bool:  # every message of the flood queued (each a job, in order)
                trail = await store.audit.entries(limit=10 * FLOOD)
                return sum(e.event == "mail_queued" for e in trail) == 2 * FLOOD

            await eventually(queued, what="both reviewers' 600 messages queued", timeout=60, interval=0.25)
            await store.approvals.create(make_approval(now=CLOCK.now(), key="witness", role="finance"))
            # Its job comes after the flood's: claimed only once each of theirs was claimed (sent, or held at the
            # cap) by one process or the other, so by the time it arrives every message of the flood had its chance.
            await eventually(lambda: box.to("f1@example.com"), what="the witness's message", timeout=60)
            for address in ("s1@example.com", "s2@example.com"):
                assert len(box.to(address)) == 5, [str(m.message["Subject"]) for m in box.to(address)]
            assert len(box.received) == 11

            async def counted() -> bool:  # a process counts a message once the server's answer is back to it,
                return sum([await sent_by(port) for port in ports]) >= 11  # which can be after the box has it

            await eventually(counted, what="both processes' counts of the messages they sent", timeout=30)
            assert sum([await sent_by(port) for port in ports]) == 11  # each process counted what it sent
        finally:
            await store.close()
            for proc in procs:
                await stopped(proc, grace=20)
            await emulator.close()
