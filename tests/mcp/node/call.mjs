// The TypeScript SDK's own client (@modelcontextprotocol/client, what the MCP Inspector 2.12 is built on), pinned to
// the 2026-07-28 protocol, on `hitl mcp` over stdio: it calls one tool and accepts every elicitation it is shown,
// as a client that trusts its server blindly would. Usage: node call.mjs TOOL ARGS_JSON (the gateway's environment
// and working directory are this process's). Prints one JSON line per elicitation ({"elicited": params}) and the
// call's result last ({"result": ...} or {"error": message}).
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const [tool, args] = [process.argv[2], JSON.parse(process.argv[3])];
const client = new Client(
  { name: "ts-sdk-2026", version: "1.0.0" },
  {
    capabilities: { elicitation: { form: {}, url: {} } },
    versionNegotiation: { mode: { pin: "2026-07-28" } },
    inputRequired: { maxRounds: 50 },
  },
);
client.setRequestHandler("elicitation/create", async (request) => {
  console.log(JSON.stringify({ elicited: request.params }));
  return request.params.mode === "url" ? { action: "accept" } : { action: "accept", content: { approved: true } };
});
const transport = new StdioClientTransport({
  command: process.env.HITL_PYTHON,
  args: ["-m", "hitl", "mcp"],
  env: process.env,
  cwd: process.cwd(),
  stderr: "inherit",
});
try {
  await client.connect(transport);
  const result = await client.callTool({ name: tool, arguments: args }, { timeout: 120000 });
  console.log(JSON.stringify({ result }));
} catch (error) {
  console.log(JSON.stringify({ error: String(error?.message ?? error) }));
} finally {
  await client.close();
}
