"""A receipt, checked as a protected service checks it: what hitl signs verifies with its published keys alone, and
each way a receipt can be wrong is refused with its own code: altered, signed by another key, of another type or
algorithm, expired, for another tool, other arguments or another audience; a key is only ever taken from the
deployment's JWKS, never from the receipt's own headers."""

from __future__ import annotations

import base64
import hashlib
import json
import warnings
from typing import Any

import pytest
from joserfc import jws
from joserfc.jwk import OKPKey

from hitl.receipts import Keys, KeySet, ReceiptError, ReceiptFailure, RemoteKeys, args_sha256, verify
from hitl.receipts.signing import SigningKeys, new_key_pem

NOW = 1_800_000_000.0
ARGS = {"to": "V-1", "amount": 120, "memo": "Grüße"}


def _keys() -> SigningKeys:
    return SigningKeys(OKPKey.import_key(new_key_pem()))


def _claims(**over: Any) -> dict[str, Any]:
    return {
        "iss": "https://hitl.example.com",
        "sub": "apr_7KQ2M9XW3A",
        "jti": "rct_1",
        "iat": NOW,
        "exp": NOW + 300,
        "tool": "pay",
        "args_sha256": args_sha256(ARGS),
        "basis": "approval",
        "approvers": ["U_FIN1"],
        "requester": "agent:riley",
        **over,
    }


def _refused(receipt: str, code: ReceiptFailure, keys: SigningKeys | Keys, **kw: Any) -> None:
    found = KeySet(keys.jwks()) if isinstance(keys, SigningKeys) else keys
    with pytest.raises(ReceiptError) as err:
        verify(receipt, **{"tool": "pay", "args": ARGS, "keys": found, "now": NOW, **kw})
    assert err.value.code is code, err.value


def _with_header(receipt: str, header: dict[str, Any]) -> str:
    """``receipt`` with its protected header replaced (its signature left as it was)."""
    _, body, sig = receipt.split(".")
    return ".".join((base64.urlsafe_b64encode(json.dumps(header).encode()).rstrip(b"=").decode(), body, sig))


def _signed(header: dict[str, Any], claims: dict[str, Any], key: OKPKey) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alg = header["alg"]
        return jws.serialize_compact(header, json.dumps(claims).encode(), key, algorithms=[alg])


def test_what_hitl_signs_verifies_with_its_published_keys() -> None:
    keys = _keys()
    receipt = keys.sign(_claims(aud="payments"))
    claims = verify(receipt, tool="pay", args=dict(ARGS), keys=KeySet(keys.jwks()), audience="payments", now=NOW)
    assert claims["sub"] == "apr_7KQ2M9XW3A" and claims["approvers"] == ["U_FIN1"]
    header = jws.extract_compact(receipt.encode()).headers()
    assert header == {"alg": "EdDSA", "kid": keys.kid, "typ": "hitl-receipt+jwt"}
    [published] = keys.jwks()["keys"]
    assert set(published) == {"kty", "crv", "x", "kid", "alg", "use"}  # never the private part
    assert published["kid"] == keys.current.thumbprint()  # RFC 7638
    # Same arguments, another order and the same numbers written otherwise: the same canonical JSON.
    assert verify(
        receipt,
        tool="pay",
        args={"memo": "Grüße", "amount": 120.0, "to": "V-1"},
        keys=KeySet(keys.jwks()),
        audience="payments",
        now=NOW,
    )


def test_the_arguments_digest_is_rfc_8785_canonical_json() -> None:
    plain = {"b": [1, 2, {"z": None, "a": True}], "a": "x"}  # ASCII and integers: sorted, compact JSON is RFC 8785
    canonical = json.dumps(plain, sort_keys=True, separators=(",", ":")).encode()
    expected = base64.urlsafe_b64encode(hashlib.sha256(canonical).digest()).rstrip(b"=").decode()
    assert args_sha256(plain) == expected
    assert args_sha256({"n": 1e21}) != args_sha256({"n": 1e20})
    with pytest.raises(ValueError, match="RFC 8785"):
        args_sha256({"n": 2**60})  # beyond what JSON carries exactly: refused, never rounded


def test_each_wrong_receipt_is_refused_with_its_own_code() -> None:
    keys, other = _keys(), _keys()
    good = keys.sign(_claims(aud="payments"))
    head, body, sig = good.split(".")
    altered = json.loads(base64.urlsafe_b64decode(body + "=="))
    altered["approvers"] = ["U_MALLORY"]
    forged_body = base64.urlsafe_b64encode(json.dumps(altered).encode()).rstrip(b"=").decode()
    _refused(f"{head}.{forged_body}.{sig}", ReceiptFailure.BAD_SIGNATURE, keys, audience="payments")
    # Signed by another key: under the deployment's kid, the signature fails; under its own kid, no such key.
    _refused(
        _signed({"alg": "EdDSA", "kid": keys.kid, "typ": "hitl-receipt+jwt"}, _claims(), other.current),
        ReceiptFailure.BAD_SIGNATURE,
        keys,
    )
    _refused(other.sign(_claims()), ReceiptFailure.UNKNOWN_KEY, keys)
    _refused(
        _signed({"alg": "EdDSA", "kid": keys.kid, "typ": "JWT"}, _claims(), keys.current),
        ReceiptFailure.WRONG_TYPE,
        keys,
    )
    hs256 = {"alg": "HS256", "kid": keys.kid, "typ": "hitl-receipt+jwt"}
    _refused(_with_header(good, hs256), ReceiptFailure.UNSUPPORTED, keys, audience="payments")
    crit = {"alg": "EdDSA", "kid": keys.kid, "typ": "hitl-receipt+jwt", "crit": ["exp"], "exp": 1}
    _refused(_with_header(good, crit), ReceiptFailure.UNSUPPORTED, keys, audience="payments")
    _refused(good, ReceiptFailure.EXPIRED, keys, audience="payments", now=NOW + 331)  # past exp and the leeway
    assert verify(good, tool="pay", args=ARGS, keys=KeySet(keys.jwks()), audience="payments", now=NOW + 329)
    _refused(good, ReceiptFailure.EXPIRED, keys, audience="payments", now=NOW - 31)  # issued in the future
    _refused(good, ReceiptFailure.WRONG_TOOL, keys, audience="payments", tool="refund")
    _refused(good, ReceiptFailure.WRONG_ARGUMENTS, keys, audience="payments", args={**ARGS, "amount": 1200})
    _refused(good, ReceiptFailure.WRONG_AUDIENCE, keys, audience="ledger")
    _refused(good, ReceiptFailure.WRONG_AUDIENCE, keys)  # it names an audience, the service none
    _refused(keys.sign(_claims()), ReceiptFailure.WRONG_AUDIENCE, keys, audience="payments")
    _refused(good, ReceiptFailure.WRONG_ISSUER, keys, audience="payments", issuer="https://other.example.com")
    for junk in ("", "a.b", "a.b.c", "x" * 20_000, good + ".x"):
        _refused(junk, ReceiptFailure.MALFORMED, keys)
    _refused(keys.sign({"tool": "pay"}), ReceiptFailure.MALFORMED, keys)  # claims missing


def test_the_key_comes_from_the_jwks_never_from_the_receipt() -> None:
    keys, mallory = _keys(), _keys()
    own_jwk = mallory.jwks()["keys"][0]
    header = {
        "alg": "EdDSA",
        "kid": mallory.kid,
        "typ": "hitl-receipt+jwt",
        "jwk": own_jwk,
        "jku": "https://mallory.example.com/jwks.json",
        "x5u": "https://mallory.example.com/cert.pem",
    }
    _refused(_signed(header, _claims(), mallory.current), ReceiptFailure.UNKNOWN_KEY, keys)


def test_the_rfc_9864_name_of_the_algorithm_is_accepted() -> None:
    keys = _keys()
    receipt = _signed({"alg": "Ed25519", "kid": keys.kid, "typ": "hitl-receipt+jwt"}, _claims(), keys.current)
    assert verify(receipt, tool="pay", args=ARGS, keys=KeySet(keys.jwks()), now=NOW)["jti"] == "rct_1"


def test_during_a_rotation_both_keys_verify_and_an_unknown_kid_refetches_at_most_so_often() -> None:
    old = _keys()
    signed_before = old.sign(_claims())
    rotated = SigningKeys(OKPKey.import_key(new_key_pem()), [OKPKey.import_key(old.jwks()["keys"][0])])
    assert [k["kid"] for k in rotated.jwks()["keys"]] == [rotated.kid, old.kid]
    published = {"doc": old.jwks()}
    now = [0.0]
    remote = RemoteKeys(
        "https://hitl.example.com/.well-known/jwks.json",
        fetch=lambda url: published["doc"],
        clock=lambda: now[0],
        min_refetch=30,
        max_age=300,
    )
    assert verify(signed_before, tool="pay", args=ARGS, keys=remote, now=NOW) and remote.fetches == 1
    published["doc"] = rotated.jwks()  # the new key is published; the old one stays for the overlap
    signed_after = rotated.sign(_claims(jti="rct_2"))
    now[0] = 31.0
    assert verify(signed_after, tool="pay", args=ARGS, keys=remote, now=NOW) and remote.fetches == 2  # refetched
    assert verify(signed_before, tool="pay", args=ARGS, keys=remote, now=NOW) and remote.fetches == 2
    for _ in range(50):  # a flood of made-up kids costs at most one fetch per min_refetch
        _refused(_keys().sign(_claims()), ReceiptFailure.UNKNOWN_KEY, remote)
    assert remote.fetches == 2
    now[0] = 62.0
    _refused(_keys().sign(_claims()), ReceiptFailure.UNKNOWN_KEY, remote)
    assert remote.fetches == 3


def test_keys_that_cannot_be_fetched_accept_nothing() -> None:
    def down(url: str) -> dict[str, Any]:
        raise OSError("connection refused")

    keys = _keys()
    with pytest.raises(ReceiptError) as err:
        verify(keys.sign(_claims()), tool="pay", args=ARGS, keys=RemoteKeys("https://x/jwks", fetch=down), now=NOW)
    assert err.value.code is ReceiptFailure.KEYS_UNAVAILABLE


def test_another_jose_implementation_verifies_a_receipt_from_the_jwks_alone() -> None:
    from jwcrypto import jwk as cjwk
    from jwcrypto import jws as cjws

    keys = _keys()
    receipt = keys.sign(_claims())
    jwks = cjwk.JWKSet.from_json(json.dumps(keys.jwks()))
    token = cjws.JWS()
    token.deserialize(receipt)
    token.verify(jwks.get_key(keys.kid), alg="EdDSA")
    assert json.loads(token.payload)["args_sha256"] == args_sha256(ARGS)
    assert token.jose_header["typ"] == "hitl-receipt+jwt"
