"""A bare Slack app on the stack `hitl serve` stands on: the floor `bench/slack_bench.py` compares a click with.

Stock Bolt for Python on its own aiohttp server (`AsyncApp.web_app`: Bolt checks the signature and parses the
body), answering as `hitl serve` does (``process_before_response``), and for every button click an ack, then
slack_sdk's ``chat.update`` of the clicked card with the blocks it already has. Nothing else: no store, no decision,
no card rendered. Run by the benchmark as ``python bench/slack_floor.py PORT`` with ``SLACK_BOT_TOKEN``,
``SLACK_SIGNING_SECRET`` and ``SLACK_API_URL`` set; it listens on 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from typing import Any

from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient


def build() -> web.Application:
    api = os.environ["SLACK_API_URL"]
    client = AsyncWebClient(token=os.environ["SLACK_BOT_TOKEN"], base_url=api if api.endswith("/") else api + "/")
    app = AsyncApp(
        client=client,
        signing_secret=os.environ["SLACK_SIGNING_SECRET"],
        process_before_response=True,
        raise_error_for_unhandled_request=False,
    )
    running: set[asyncio.Task[Any]] = set()

    @app.action(re.compile(".*"))
    async def clicked(ack: Any, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        message = body["message"]

        async def update() -> None:
            await client.chat_update(
                channel=body["channel"]["id"], ts=message["ts"], text=message["text"], blocks=message["blocks"]
            )

        task = asyncio.create_task(update())  # after the answer, as `hitl serve` updates a card
        running.add(task)
        task.add_done_callback(running.discard)

    web_app = app.web_app(path="/slack/events")

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    web_app.router.add_get("/healthz", healthz)
    return web_app


if __name__ == "__main__":
    web.run_app(build(), host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
