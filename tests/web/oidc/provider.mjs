// A real OpenID Connect provider (panva's oidc-provider) for the web inbox's tests, on 127.0.0.1.
// argv: port, then a JSON list of clients ({client_id, client_secret, redirect_uris}). Each person signs in by
// typing their id on the login form (no password: the tests are the only people here); their ID token carries
// Slack's claims for that id (https://slack.com/user_id and team_id T0TEST), an e-mail <id>@example.test verified
// unless the id starts with "unverified", and sub = the id. Prints "listening <issuer>" once it serves.
import http from "node:http";
import Provider from "oidc-provider";

const [port, clientsJson] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;
const TEAM = process.env.OIDC_TEAM_ID || "T0TEST";

const provider = new Provider(issuer, {
  clients: JSON.parse(clientsJson).map((c) => ({ ...c, grant_types: ["authorization_code"], response_types: ["code"] })),
  pkce: { required: () => true },
  conformIdTokenClaims: false, // the claims in the ID token itself, as Slack's sign-in sends them
  claims: {
    openid: ["sub", "https://slack.com/user_id", "https://slack.com/team_id"],
    email: ["email", "email_verified"],
    profile: ["name"],
  },
  features: { devInteractions: { enabled: false } },
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        return {
          sub: id,
          name: `Person ${id}`,
          email: `${id.toLowerCase()}@example.test`,
          email_verified: !id.startsWith("unverified"),
          "https://slack.com/user_id": id,
          "https://slack.com/team_id": TEAM,
        };
      },
    };
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  cookies: { keys: ["test-only-cookie-key"] },
});
provider.proxy = false;

function readForm(req) {
  return new Promise((resolve) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => resolve(new URLSearchParams(body)));
  });
}

const escape = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const server = http.createServer(async (req, res) => {
  const m = req.url.match(/^\/interaction\/([A-Za-z0-9_-]+)$/);
  if (!m) return provider.callback()(req, res);
  try {
    const details = await provider.interactionDetails(req, res);
    if (details.prompt.name === "consent") {
      const grant = new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
      grant.addOIDCScope(details.params.scope);
      const grantId = await grant.save();
      return await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
    }
    if (req.method === "POST") {
      const login = (await readForm(req)).get("login");
      return await provider.interactionFinished(req, res, { login: { accountId: login } }, { mergeWithLastSubmission: false });
    }
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(`<!doctype html><title>Test provider</title><form method="post" action="/interaction/${escape(m[1])}">` +
      `<label>Who are you? <input name="login" autofocus></label><button type="submit">Sign in</button></form>`);
  } catch (err) {
    res.writeHead(400, { "content-type": "text/plain" });
    res.end(`interaction failed: ${err.message}`);
  }
});
server.listen(Number(port), "127.0.0.1", () => console.log(`listening ${issuer}`));
