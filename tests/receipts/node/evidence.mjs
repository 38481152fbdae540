// An auditor in Node.js checking hitl's evidence record offline with jose: the keys history (a JWKS file kept from
// the deployment's /.well-known/jwks-history.json, argv[3]) as a local key set; the record on argv[2]. Prints its
// claims as one JSON line, or jose's error code.
import { readFileSync } from "node:fs";
import { createLocalJWKSet, jwtVerify } from "jose";

const keys = createLocalJWKSet(JSON.parse(readFileSync(process.argv[3], "utf8")));
try {
  const { payload } = await jwtVerify(process.argv[2], keys, { typ: "hitl-evidence+jwt", algorithms: ["EdDSA", "Ed25519"] });
  process.stdout.write(JSON.stringify({ ok: true, claims: payload }) + "\n");
} catch (err) {
  process.stdout.write(JSON.stringify({ ok: false, code: err.code ?? String(err) }) + "\n");
}
