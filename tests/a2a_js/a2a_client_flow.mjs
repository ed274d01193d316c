// The official A2A JavaScript SDK's client (@a2a-js/sdk) against a Troupe server. Driven by
// tests/test_a2a_js.py; every command prints one JSON line (an SDK error as {"error": ...}).
//
//   node a2a_client_flow.mjs <serverUrl> <key> card   <agentId>
//   node a2a_client_flow.mjs <serverUrl> <key> pause  <agentId> <prompt> <resourceId>   (streamed)
//   node a2a_client_flow.mjs <serverUrl> <key> answer <agentId> <taskId> <decisionsJSON>
//   node a2a_client_flow.mjs <serverUrl> <key> get    <agentId> <taskId>
//   node a2a_client_flow.mjs <serverUrl> <key> cancel <agentId> <taskId> [reason]
//   node a2a_client_flow.mjs <serverUrl> <key> cancel-working <agentId> <prompt> <resourceId> <reason>
//       (streamed: the task is cancelled as soon as its first event names it; prints the cancel's answer
//       and the last task the stream brought)
import { randomUUID } from "node:crypto";
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
} from "@a2a-js/sdk/client";
import { Role, TaskState } from "@a2a-js/sdk";

const [serverUrl, key, command, agentId, ...rest] = process.argv.slice(2);
// The trailing slash matters: the SDK resolves the card path against the base URL as a directory.
const base = `${serverUrl}/a2a/${agentId}/`;

// Every request (the card included) carries the key, as Troupe's front door asks.
const authed = createAuthenticatingFetchWithRetry(fetch, {
  headers: async () => ({ Authorization: `Bearer ${key}` }),
  shouldRetryWithHeaders: async () => undefined,
});

async function client() {
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl: authed })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl: authed }),
    }),
  );
  return factory.createFromUrl(base);
}

function part(content) {
  return { content, metadata: undefined, filename: "", mediaType: "" };
}

function message(parts, taskId = "") {
  return {
    messageId: randomUUID(),
    contextId: "",
    taskId,
    role: Role.ROLE_USER,
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

function request(msg, metadata) {
  return { tenant: "", message: msg, configuration: undefined, metadata };
}

// A task as the test reads it: its state's name, status text, pending calls and answer.
function view(task) {
  const parts = task.status?.message?.parts ?? [];
  const data = parts.find((p) => p.content?.$case === "data")?.content.value;
  const text = parts.filter((p) => p.content?.$case === "text").map((p) => p.content.value);
  const answer = (task.artifacts ?? []).flatMap((a) => a.parts).filter((p) => p.content?.$case === "text");
  return {
    taskId: task.id,
    state: TaskState[task.status?.state],
    statusText: text.join("\n"),
    pending: data ?? null,
    answer: answer.map((p) => p.content.value).join("\n"),
  };
}

async function run() {
  if (command === "card") {
    const card = await new DefaultAgentCardResolver({ fetchImpl: authed }).resolve(base);
    return {
      name: card.name,
      streaming: card.capabilities?.streaming,
      skills: card.skills.map((s) => s.id),
      schemes: Object.keys(card.securitySchemes ?? {}),
    };
  }
  const a2a = await client();
  if (command === "pause") {
    const [prompt, resourceId] = rest;
    let last = null;
    const msg = message([part({ $case: "text", value: prompt })]);
    for await (const event of a2a.sendMessageStream(request(msg, { resourceId }))) {
      if (event.payload?.$case === "task") last = event.payload.value;
    }
    return view(last);
  }
  if (command === "answer") {
    const [taskId, decisions] = rest;
    const msg = message([part({ $case: "data", value: { decisions: JSON.parse(decisions) } })], taskId);
    const result = await a2a.sendMessage(request(msg, undefined));
    return view(result);
  }
  if (command === "get") {
    const [taskId] = rest;
    return view(await a2a.getTask({ tenant: "", id: taskId, historyLength: undefined }));
  }
  if (command === "cancel") {
    const [taskId, reason] = rest;
    const metadata = reason ? { reason } : undefined;
    return view(await a2a.cancelTask({ tenant: "", id: taskId, metadata }));
  }
  if (command === "cancel-working") {
    const [prompt, resourceId, reason] = rest;
    let last = null;
    let cancelled = null;
    const msg = message([part({ $case: "text", value: prompt })]);
    for await (const event of a2a.sendMessageStream(request(msg, { resourceId }))) {
      if (event.payload?.$case !== "task") continue;
      last = event.payload.value;
      if (!cancelled) {
        cancelled = view(await a2a.cancelTask({ tenant: "", id: last.id, metadata: { reason } }));
      }
    }
    return { cancelled, last: view(last) };
  }
  throw new Error(`unknown command ${command}`);
}

try {
  console.log(JSON.stringify(await run()));
} catch (error) {
  console.log(JSON.stringify({ error: { name: error?.constructor?.name, message: String(error?.message ?? error) } }));
}
