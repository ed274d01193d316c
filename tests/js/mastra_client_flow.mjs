// Mastra's own JS client (@mastra/client-js, unchanged) against a live Troupe server.
// Usage: node mastra_client_flow.mjs <baseUrl> <apiKey> <resourceId>
// Prints one JSON report on stdout; tests/test_http_mastra_client.py checks it.
import { MastraClient, MastraClientError } from "@mastra/client-js";

const [baseUrl, apiKey, resource] = process.argv.slice(2);
const client = new MastraClient({ baseUrl, headers: { Authorization: `Bearer ${apiKey}` } });
const report = {};

async function chunksOf(response) {
  const chunks = [];
  await response.processDataStream({ onChunk: async (chunk) => { chunks.push(chunk); } });
  return chunks;
}

// What the client logs while it reads a stream (it console.errors chunks it cannot place).
const logged = [];
const consoleError = console.error;
console.error = (...args) => {
  logged.push(args.map(String).join(" "));
};
async function quietly(work) {
  const before = logged.length;
  const value = await work();
  return { value, logged: logged.slice(before) };
}

async function failure(work) {
  try {
    await work();
    return "no error";
  } catch (error) {
    return {
      isClientError: error instanceof MastraClientError,
      status: error.status,
      message: error.body?.error,
      code: error.body?.code,
    };
  }
}

const textOf = (chunks) => chunks.filter((c) => c.type === "text-delta").map((c) => c.payload.text).join("");

report.agents = Object.keys(await client.listAgents());
const agent = client.getAgent("ops");
report.details = await agent.details();

// Stream until the approval chunk, approve, read the final text.
const streamed = await chunksOf(await agent.stream("delete abc-123", { memory: { thread: "js-1", resource } }));
const approval = streamed.find((c) => c.type === "tool-call-approval");
report.streamTypes = streamed.map((c) => c.type);
report.approval = approval;
const approved = await chunksOf(
  await agent.approveToolCall({ runId: approval.runId, toolCallId: approval.payload.toolCallId }),
);
report.approvedText = textOf(approved);
report.approvedTypes = approved.map((c) => c.type);

// Generate (pauses), then decline with a reason; and decline a streamed one.
const paused = await agent.generate("delete it", { memory: { thread: "js-2", resource } });
report.paused = { finishReason: paused.finishReason, toolCallId: paused.suspendPayload?.toolCallId };
const declined = await agent.declineToolCallGenerate({
  runId: paused.runId,
  toolCallId: paused.suspendPayload.toolCallId,
  reason: "not today",
});
report.declinedText = declined.text;
const second = await agent.generate("delete it", { memory: { thread: "js-3", resource } });
const declinedStream = await quietly(async () =>
  chunksOf(await agent.declineToolCall({ runId: second.runId, toolCallId: "call-1" })),
);
report.declinedStreamText = textOf(declinedStream.value);
report.declinedTypes = declinedStream.value.map((c) => c.type);
report.declineLogged = declinedStream.logged;

// Generate, then approve with the generate form.
const third = await agent.generate("delete it", { memory: { thread: "js-7", resource } });
const approvedGenerate = await agent.approveToolCallGenerate({ runId: third.runId, toolCallId: "call-1" });
report.approvedGenerate = {
  text: approvedGenerate.text,
  finishReason: approvedGenerate.finishReason,
  toolResult: approvedGenerate.toolResults?.[0]?.payload?.result,
  totalUsage: approvedGenerate.totalUsage,
};

// An approval pause answered through resumeStream, with its resumeSchema.
const fourth = await agent.generate("delete it", { memory: { thread: "js-8", resource } });
report.approvalSchema = JSON.parse(fourth.suspendPayload.resumeSchema);
report.resumedApprovalText = textOf(
  await chunksOf(await agent.resumeStream({ approved: false, reason: "resumed no" }, { runId: fourth.runId, toolCallId: "call-1" })),
);

// List what waits, then decide it through its thread.
const waiting = await agent.generate("delete it", { memory: { thread: "js-4", resource } });
const listed = await agent.listSuspendedRuns({ resourceId: resource });
report.listed = { total: listed.total, runIds: listed.runs.map((r) => r.runId), first: listed.runs[0] };
report.waitingRunId = waiting.runId;
report.sent = await agent.sendToolApproval({
  threadId: "js-4",
  resourceId: resource,
  toolCallId: "call-1",
  approved: true,
});

// A tool that asked a question: answer it with resumeStream.
const planner = client.getAgent("planner");
const asked = await planner.generate("weather?", { memory: { thread: "js-5", resource } });
report.resumedText = textOf(
  await chunksOf(await planner.resumeStream({ city: "Rome" }, { runId: asked.runId, toolCallId: "w1" })),
);

// Mistakes are HTTP errors the client raises, with Mastra's body: error (the message), code, details.
const stillPaused = await agent.generate("delete it", { memory: { thread: "js-6", resource } });
report.mistake = await failure(() => agent.approveToolCall({ runId: stillPaused.runId, toolCallId: "nope" }));
report.unknownRun = await failure(() => agent.approveToolCall({ runId: "no-such-run", toolCallId: "call-1" }));
report.threadWithoutMemory = await failure(() => agent.listSuspendedRuns({ threadId: "js-4" }));

console.error = consoleError;
console.log(JSON.stringify(report));
