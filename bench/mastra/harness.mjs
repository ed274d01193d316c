// Mastra under the benchmark's workloads (bench/harness.py defines them; bench/peer_mastra.py drives this).
// Usage: node harness.mjs <libsql file> [FULL] [--turn-ms=N]
//   FULL: SQLite synchronous=FULL instead of Mastra's NORMAL; --turn-ms: the model waits N ms per turn
//   (W1-300ms; the Python peers' models wait the same with an asyncio sleep).
// Protocol: one JSON request per line on stdin ({id, op, ...}), one JSON answer per line on stdout
// ({id, ok, result} or {id, ok: false, error}). Requests run concurrently (W3 keeps 100 in flight).
// The first line written is {ready: true, ...} once the store is open.
//
// The model is scripted and instant unless --turn-ms is given (no network): it calls the gated tool unless the conversation ends
// with that tool's result, then answers; it checks the result is the approved tool's output, so a
// declined or failed call cannot pass for an approval. Telemetry is off (it would use the network).
// With --turn-ms it waits that long at the start of each turn, and logs when each wait began and ended.
process.env.MASTRA_TELEMETRY_DISABLED = "1";

import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Agent } from "@mastra/core/agent";
import { Mastra } from "@mastra/core/mastra";
import { createTool } from "@mastra/core/tools";
import { LibSQLStore } from "@mastra/libsql";
import { z } from "zod";

const FINAL_TEXT = "Deleted.";
const PROMPT = "delete abc-123";
const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 };

const options = process.argv.slice(2).filter((arg) => arg.startsWith("--"));
const [dbFile, synchronous] = process.argv.slice(2).filter((arg) => !arg.startsWith("--"));
let turnMs = 0;
for (const option of options) {
  const match = /^--turn-ms=(\d+(?:\.\d+)?)$/.exec(option);
  if (!match) throw new Error(`unknown option ${option}`);
  turnMs = Number(match[1]);
}

// [began, ended] of each model wait (performance.now(), ms); latency() reads and clears it.
const waits = [];

async function modelWait() {
  const began = performance.now();
  await new Promise((resolve) => setTimeout(resolve, turnMs));
  waits.push([began, performance.now()]);
}

// A tool call's result in the prompt, or undefined when the last message is not one.
function lastToolResult(prompt, toolName) {
  const last = prompt[prompt.length - 1];
  if (!last || last.role !== "tool") return undefined;
  const part = last.content.find((p) => p.type === "tool-result" && p.toolName === toolName);
  if (!part) throw new Error(`model: tool message without a ${toolName} result`);
  return JSON.stringify(part.output);
}

function streamOf(parts) {
  return new ReadableStream({
    start(controller) {
      for (const part of parts) controller.enqueue(part);
      controller.close();
    },
  });
}

// An AI SDK v2 language model (the interface Mastra calls), scripted: no recording of its calls, so
// memory stays flat over thousands of runs.
function scriptedModel(name, toolName, args, expectInResult) {
  let calls = 0;
  return {
    specificationVersion: "v2",
    provider: "bench",
    modelId: name,
    supportedUrls: {},
    async doGenerate() {
      throw new Error("the benchmark streams");
    },
    async doStream({ prompt, tools }) {
      if (turnMs > 0) await modelWait();
      const offered = (tools ?? []).map((t) => t.name);
      if (!offered.includes(toolName)) throw new Error(`model ${name}: ${toolName} not offered (${offered})`);
      const result = lastToolResult(prompt, toolName);
      const head = [{ type: "stream-start", warnings: [] }];
      if (result === undefined) {
        const call = { type: "tool-call", toolCallId: `call-${++calls}`, toolName, input: JSON.stringify(args) };
        return { stream: streamOf([...head, call, { type: "finish", finishReason: "tool-calls", usage }]) };
      }
      if (!result.includes(expectInResult)) throw new Error(`model ${name}: unexpected tool result ${result}`);
      const text = [
        { type: "text-start", id: "t" },
        { type: "text-delta", id: "t", delta: FINAL_TEXT },
        { type: "text-end", id: "t" },
      ];
      return { stream: streamOf([...head, ...text, { type: "finish", finishReason: "stop", usage }]) };
    },
  };
}

const deleteRecord = createTool({
  id: "delete_record",
  description: "Delete a record",
  inputSchema: z.object({ id: z.string() }),
  requireApproval: true,
  execute: async ({ id }) => ({ deleted: id }),
});

const records = new Agent({
  id: "records",
  name: "records",
  instructions: "You manage records.",
  model: scriptedModel("records-model", "delete_record", { id: "abc-123" }, '"deleted"'),
  tools: { delete_record: deleteRecord },
});

// W2: the subagent is a tool of the supervisor (Mastra names it agent-<key>); its approval surfaces in
// the supervisor's stream and is approved on the supervisor's run.
const supervisor = new Agent({
  id: "supervisor",
  name: "supervisor",
  instructions: "Delegate record work to the records agent.",
  model: scriptedModel("supervisor-model", "agent-records", { prompt: PROMPT }, FINAL_TEXT),
  agents: { records },
});

if (!dbFile) throw new Error("usage: node harness.mjs <libsql file> [FULL] [--turn-ms=N]");
if (synchronous !== undefined && synchronous !== "FULL") throw new Error(`unknown setting ${synchronous}`);
const storage = new LibSQLStore({ id: "bench", url: `file:${dbFile}` });
const mastra = new Mastra({ agents: { records, supervisor }, storage, logger: false });
const agents = { w1: mastra.getAgent("records"), w2: mastra.getAgent("supervisor") };

function agentFor(workload) {
  if (!Object.hasOwn(agents, workload)) throw new Error(`unknown workload ${JSON.stringify(workload)}`);
  return agents[workload];
}

// Reads a stream to its end; returns its chunks' types, the approval chunk and the text.
async function drain(output) {
  const types = [];
  let approval;
  let text = "";
  for await (const chunk of output.fullStream) {
    types.push(chunk.type);
    if (chunk.type === "tool-call-approval") approval = chunk.payload;
    else if (chunk.type === "text-delta") text += chunk.payload.text;
    else if (chunk.type === "error") throw new Error(`stream error: ${JSON.stringify(chunk.payload)}`);
  }
  return { types, approval, text };
}

// start -> paused for approval; the token is what approving needs.
async function pause(workload, i) {
  const output = await agentFor(workload).stream(i < 0 ? PROMPT : `delete record ${i}`);
  const { types, approval } = await drain(output);
  if (!approval) throw new Error(`run did not pause for approval: ${types}`);
  return { workload, runId: output.runId, toolCallId: approval.toolCallId };
}

// approve -> the tool runs -> final text.
async function approve({ workload, runId, toolCallId }) {
  const output = await agentFor(workload).approveToolCall({ runId, toolCallId });
  const { types, text } = await drain(output);
  if (text !== FINAL_TEXT) throw new Error(`unexpected final text ${JSON.stringify(text)}: ${types}`);
}

// One cycle per sample, timed here around the same span as bench/harness.py's latency(); with each
// cycle, the model's waits inside it: [how many, their ms] (none with an instant model).
async function latency({ workload, warmup, cycles }) {
  for (let n = 0; n < warmup; n++) await approve(await pause(workload, -1));
  waits.length = 0;
  const windows = [];
  for (let n = 0; n < cycles; n++) {
    const started = performance.now();
    await approve(await pause(workload, -1));
    windows.push([started, performance.now()]);
  }
  const waited = windows.map(([start, end]) => {
    const inside = waits.filter(([began, ended]) => start <= began && ended <= end);
    return [inside.length, inside.reduce((total, [began, ended]) => total + ended - began, 0)];
  });
  waits.length = 0;
  return { samples: windows.map(([start, end]) => end - start), waited };
}

async function listPaused() {
  const { runs } = await agents.w1.listSuspendedRuns();
  return runs.map((run) => {
    const call = run.toolCalls.find((c) => c.requiresApproval);
    if (!call) throw new Error(`suspended run ${run.runId} has no approval pending`);
    return { workload: "w1", runId: run.runId, toolCallId: call.toolCallId };
  });
}

// The durability settings of the store's connection (the client's pool opens a second one only while a
// transaction holds the first; the workloads' writes are single statements).
async function pragmas() {
  const found = {};
  for (const name of ["journal_mode", "synchronous"]) {
    const { rows } = await storage.client.execute(`PRAGMA ${name}`);
    found[name] = Object.values(rows[0] ?? {})[0] ?? null;
  }
  return found;
}

function versions() {
  const of = (name) => JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url))).version;
  return { node: process.version, "@mastra/core": of("@mastra/core"), "@mastra/libsql": of("@mastra/libsql") };
}

const ops = {
  pause: (req) => pause(req.workload ?? "w1", req.i),
  approve: (req) => approve(req.token),
  latency,
  list: listPaused,
  pragmas,
  // V8 heap in use after a full collection (the process runs with --expose-gc).
  heap: async () => {
    globalThis.gc();
    return process.memoryUsage().heapUsed;
  },
};

function reply(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

const pending = new Set();

async function handle(line) {
  let req;
  try {
    req = JSON.parse(line);
    const op = ops[req.op];
    if (!op) throw new Error(`unknown op ${JSON.stringify(req.op)}`);
    reply({ id: req.id, ok: true, result: (await op(req)) ?? null });
  } catch (error) {
    reply({ id: req?.id ?? null, ok: false, error: String(error?.stack ?? error) });
  }
}

await storage.init();
// Mastra sets synchronous=NORMAL on its connection; FULL (an fsync per commit) is asked for by name.
if (synchronous) await storage.client.execute(`PRAGMA synchronous = ${synchronous}`);
reply({ ready: true, pid: process.pid, versions: versions(), pragmas: await pragmas() });
const input = createInterface({ input: process.stdin });
input.on("line", (line) => {
  const job = handle(line);
  pending.add(job);
  void job.finally(() => pending.delete(job));
});
// Stdin closed: answer what is in flight, then leave (the store's handles close with the process).
input.on("close", async () => {
  await Promise.allSettled([...pending]);
  process.exit(0);
});
