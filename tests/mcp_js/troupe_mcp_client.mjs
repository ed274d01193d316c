// Drives Troupe's /mcp with the official TypeScript SDK's client (@modelcontextprotocol/sdk), as any
// MCP host would: list the agents' tools, call one, answer the elicitation its approval sends.
// Usage: node troupe_mcp_client.mjs URL KEY RESOURCE ANSWER
//   (ANSWER: approve | decline | unfit, an accept whose content does not fit the question | none)
// Prints one JSON line: what was listed, asked and returned.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, key, resource, answer] = process.argv.slice(2);
const asked = [];
const capabilities = answer === "none" ? {} : { elicitation: {} };
const client = new Client({ name: "troupe-test", version: "1.0.0" }, { capabilities });
if (answer !== "none") {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push({ message: request.params.message, schema: request.params.requestedSchema });
    if (answer === "approve") return { action: "accept", content: { approved: true } };
    if (answer === "unfit") return { action: "accept", content: { approved: "true" } };
    return { action: "accept", content: { approved: false, reason: "not from node" } };
  });
}
const transport = new StreamableHTTPClientTransport(new URL(url + "/mcp"), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
try {
  await client.connect(transport);
  const tools = (await client.listTools()).tools.map((t) => t.name);
  const result = await client.callTool({ name: "ops", arguments: { prompt: "delete abc-123", resourceId: resource } });
  console.log(JSON.stringify({ tools, asked, result, protocol: transport.protocolVersion }));
} catch (error) {
  console.log(JSON.stringify({ error: String(error && error.message ? error.message : error) }));
} finally {
  await client.close();
}
