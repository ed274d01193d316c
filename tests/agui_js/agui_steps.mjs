// The official AG-UI client (@ag-ui/client's HttpAgent, unchanged) against a live Troupe server.
// Usage: node agui_steps.mjs <baseUrl> '<steps as JSON>'
// Each step runs one AG-UI run on a named client (an HttpAgent made on first use, one per person/page):
//   {"client": "A", "agent": "ops", "key": "key-a", "thread": "t1", "resource": "a1"}  (made on first use)
//   + "user": "text"            a new user message, then a run
//   + "resume": {id: response}  answers built with the client's buildResumeArray ("*": every pending one)
//   + "rawResume": [entries]    entries sent as given (a client that does not check them itself)
//   + nothing else              a run with nothing new (how a page that lost its stream reconnects)
// Prints one JSON line: per step the event types, the interesting events, what runAgent threw, and the
// client's pendingInterrupts, state and message count after it. tests/test_agui.py reads it.
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [baseUrl, stepsJson] = process.argv.slice(2);
const steps = JSON.parse(stepsJson);
const clients = {};
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
      }),
      resource: step.resource,
    };
  }
  return clients[step.client];
}

function resumeOf(agent, step) {
  if (step.rawResume) return step.rawResume;
  if (!step.resume) return undefined;
  const responses = {};
  for (const interrupt of agent.pendingInterrupts) {
    const response = step.resume[interrupt.id] ?? step.resume["*"];
    if (response) responses[interrupt.id] = response;
  }
  return buildResumeArray(agent.pendingInterrupts, responses);
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
      { onEvent: ({ event }) => void events.push(event) },
    );
    report.result = result.result ?? null;
  } catch (error) {
    report.thrown = String(error?.message ?? error);
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
