// The official AG-UI client (@ag-ui/client's HttpAgent, unchanged) against a live Troupe server.
// Usage: node agui_steps.mjs <baseUrl> '<steps as JSON>'
// Each step runs one AG-UI run on a named client (an HttpAgent made on first use, one per person/page):
//   {"client": "A", "agent": "ops", "key": "key-a", "thread": "t1", "resource": "a1"}  (made on first use)
//   + "user": "text"            a new user message, then a run
//   + "resume": {id: response}  answers built with the client's buildResumeArray (keyed by interrupt id
//                               or by its toolCallId; "*": every pending one)
//   + "rawResume": [entries]    entries sent as given (a client that does not check them itself); an
//                               interruptId "call:<toolCallId>" is the id of the interrupt with that
//                               toolCallId last announced to any client (ids name the run too)
//   + nothing else              a run with nothing new (how a page that lost its stream reconnects)
//   + "state": {...}            the state a page starts with (one it kept), when the client is made
//   + "cancelOn": "TYPE:name"   when an event of that type (with that toolCallName) arrives, cancel the
//                               Troupe run (RUN_STARTED's metadata.troupe.runIds[0]) through Troupe's route
//                               POST /api/agents/<agent>/cancel-run, with "reason"; AG-UI has no cancel
//   + "cancelSubagent": "id"    ... cancel instead the run of the subagent that event belongs to
//                               (its subagentRunId), an agent with that id
// Prints one JSON line: per step the event types, the interesting events, what runAgent threw, and the
// client's pendingInterrupts, state and message count after it. tests/test_agui.py reads it.
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [baseUrl, stepsJson] = process.argv.slice(2);
const steps = JSON.parse(stepsJson);
const clients = {};
// toolCallId -> the id of the interrupt last announced for it, to any client.
const announced = {};
const KEPT = new Set([
  "RUN_STARTED",
  "RUN_FINISHED",
  "RUN_ERROR",
  "STATE_SNAPSHOT",
  "TOOL_CALL_START",
  "TOOL_CALL_RESULT",
  "SUBAGENT_STARTED",
  "SUBAGENT_FINISHED",
  "SUBAGENT_ERROR",
]);

function clientFor(step) {
  if (!clients[step.client]) {
    clients[step.client] = {
      agent: new HttpAgent({
        url: `${baseUrl}/api/agents/${step.agent}/agui`,
        headers: { Authorization: `Bearer ${step.key}` },
        threadId: step.thread,
        ...(step.state ? { initialState: step.state } : {}),
      }),
      resource: step.resource,
    };
  }
  return clients[step.client];
}

function resumeOf(agent, step) {
  if (step.rawResume) {
    return step.rawResume.map((entry) =>
      typeof entry.interruptId === "string" && entry.interruptId.startsWith("call:")
        ? { ...entry, interruptId: announced[entry.interruptId.slice(5)] ?? entry.interruptId }
        : entry,
    );
  }
  if (!step.resume) return undefined;
  const responses = {};
  for (const interrupt of agent.pendingInterrupts) {
    const response = step.resume[interrupt.id] ?? step.resume[interrupt.toolCallId] ?? step.resume["*"];
    if (response) responses[interrupt.id] = response;
  }
  return buildResumeArray(agent.pendingInterrupts, responses);
}

// Cancel the Troupe run through Troupe's own route, as the page's person (AG-UI has no such request).
async function cancelRun(step, agentId, runId) {
  const response = await fetch(`${baseUrl}/api/agents/${agentId}/cancel-run`, {
    method: "POST",
    headers: { Authorization: `Bearer ${step.key}`, "Content-Type": "application/json" },
    body: JSON.stringify({ runId, reason: step.reason }),
  });
  return { status: response.status, body: await response.json() };
}

function cancelsOn(step, event) {
  if (!step.cancelOn) return false;
  const [type, name] = step.cancelOn.split(":");
  return event.type === type && (!name || event.toolCallName === name);
}

async function run(step) {
  const { agent, resource } = clientFor(step);
  if (step.user) agent.addMessage({ id: `u-${Math.random()}`, role: "user", content: step.user });
  const events = [];
  const report = {};
  try {
    const resume = resumeOf(agent, step);
    const result = await agent.runAgent(
      { forwardedProps: { resourceId: resource }, ...(resume ? { resume } : {}) },
      {
        onEvent: async ({ event }) => {
          events.push(event);
          if (event.type === "RUN_STARTED") report.troupeRun = event.metadata?.troupe?.runIds?.[0];
          if (cancelsOn(step, event) && !report.cancel) {
            report.cancel = step.cancelSubagent
              ? await cancelRun(step, step.cancelSubagent, event.subagentRunId)
              : await cancelRun(step, step.agent, report.troupeRun);
          }
        },
      },
    );
    report.result = result.result ?? null;
  } catch (error) {
    report.thrown = String(error?.message ?? error);
  }
  for (const event of events) {
    if (event.type === "RUN_FINISHED" && event.outcome?.type === "interrupt") {
      for (const interrupt of event.outcome.interrupts) announced[interrupt.toolCallId] = interrupt.id;
    }
  }
  report.types = events.map((e) => e.type);
  report.events = events.filter((e) => KEPT.has(e.type));
  report.pending = agent.pendingInterrupts;
  report.state = agent.state;
  report.messages = agent.messages.length;
  return report;
}

const reports = [];
for (const step of steps) reports.push(await run(step));
console.log(JSON.stringify(reports));
