// A protected system in Node.js checking hitl's receipts the way the receipts page shows: jose's
// createRemoteJWKSet with its own defaults (a JWKS kept 10 minutes; an unknown kid fetches again at most every
// 30 s), bound once to hitl serve's JWKS URL (argv[2]) for the life of the process, as a service would be.
// Reads one receipt a line on stdin; answers one JSON line each: its kid and jti, or jose's error code, and how
// many times jose has fetched the JWKS so far (global fetch, counted: jose calls it for each fetch).
import { createInterface } from "node:readline";
import { createRemoteJWKSet, jwtVerify, decodeProtectedHeader } from "jose";

let fetches = 0;
const realFetch = globalThis.fetch;
globalThis.fetch = (...args) => {
  fetches += 1;
  return realFetch(...args);
};

const keys = createRemoteJWKSet(new URL(process.argv[2]));

for await (const line of createInterface({ input: process.stdin })) {
  const receipt = line.trim();
  let answer;
  try {
    const { payload } = await jwtVerify(receipt, keys, {
      typ: "hitl-receipt+jwt",
      algorithms: ["EdDSA", "Ed25519"],
      clockTolerance: 30,
    });
    answer = { ok: true, kid: decodeProtectedHeader(receipt).kid, jti: payload.jti };
  } catch (err) {
    answer = { ok: false, code: err.code ?? String(err) };
  }
  process.stdout.write(JSON.stringify({ ...answer, fetches }) + "\n");
}
