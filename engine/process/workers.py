"""Names for the workers of a process: what claims, run ownership, job consumption and the audit log tell apart.

Two workers that shared a name would each take the other's claim, run or job for its own: a caller reaching an
execution another had just finished would be handed its output, and two processes could drive one run at once. So
every name is unique among every worker of every process on a store.
"""

from __future__ import annotations

import os
import socket

from hitl.engine.domain.ids import short_id

__all__ = ["worker_name"]


def worker_name(kind: str) -> str:
    """A unique name for one worker of this process: ``kind:host:pid:id`` (``kind`` says what it is: ``agent``,
    ``cli``, ``mcp``, a framework's name)."""
    return f"{kind}:{socket.gethostname()}:{os.getpid()}:{short_id('w')}"
