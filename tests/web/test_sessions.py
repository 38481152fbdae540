"""The web inbox's sessions on the injectable clock: idle and absolute expiry, one-use sign-in states bound to the
browser that started them, and sign-out that revokes."""

from __future__ import annotations

from hitl.testing import FakeClock
from hitl.web.app import safe_return_path
from hitl.web.sessions import SIGN_IN_TTL, SessionBook


def book(clock: FakeClock) -> SessionBook:
    return SessionBook(clock.now, idle=30 * 60.0, absolute=12 * 3600.0)


def test_a_session_ends_after_30_idle_minutes_but_use_keeps_it_alive() -> None:
    clock = FakeClock(1_000_000.0)
    sessions = book(clock)
    sid, _ = sessions.open(reviewer="U1", issuer="https://id", subject="s")
    clock.advance(29 * 60)
    assert sessions.get(sid) is not None  # used: idle time starts again
    clock.advance(29 * 60)
    assert sessions.get(sid) is not None
    clock.advance(31 * 60)
    assert sessions.get(sid) is None
    assert sessions.get(sid) is None  # forgotten, not revived


def test_a_session_ends_12_hours_after_sign_in_however_used() -> None:
    clock = FakeClock(1_000_000.0)
    sessions = book(clock)
    sid, _ = sessions.open(reviewer="U1", issuer="https://id", subject="s")
    for _ in range(12 * 3 - 1):
        clock.advance(20 * 60)
        assert sessions.get(sid) is not None
    clock.advance(20 * 60)
    assert sessions.get(sid) is None


def test_each_sign_in_gets_new_ids_and_sign_out_revokes() -> None:
    sessions = book(FakeClock(1_000_000.0))
    a, first = sessions.open(reviewer="U1", issuer="https://id", subject="s")
    b, second = sessions.open(reviewer="U1", issuer="https://id", subject="s")
    assert a != b and first.csrf != second.csrf
    sessions.revoke(a)
    assert sessions.get(a) is None and sessions.get(b) is second


def test_a_sign_in_state_is_used_once_by_the_browser_that_started_it_within_ten_minutes() -> None:
    clock = FakeClock(1_000_000.0)
    sessions = book(clock)
    state, pending = sessions.begin(browser="mine", return_to="/inbox")
    assert sessions.finish(state, browser="theirs") is None  # another browser: refused, and the state is spent
    assert sessions.finish(state, browser="mine") is None
    state, pending = sessions.begin(browser="mine", return_to="/inbox")
    assert sessions.finish(state, browser="mine") == pending
    assert sessions.finish(state, browser="mine") is None  # once
    state, _ = sessions.begin(browser="mine", return_to="/inbox")
    clock.advance(SIGN_IN_TTL + 1)
    assert sessions.finish(state, browser="mine") is None


def test_only_the_inboxs_own_pages_are_return_paths() -> None:
    assert safe_return_path("/inbox/approvals/apr_7KQ2M9XW") == "/inbox/approvals/apr_7KQ2M9XW"
    for bad in (None, "", "//evil.example", "/\\evil", "https://evil.example", "/inbox/approvals/x/../../auth"):
        assert safe_return_path(bad) == "/inbox"
