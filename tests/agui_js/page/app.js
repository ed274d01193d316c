// A small AG-UI front end: @ag-ui/client's HttpAgent, an interrupt card per pending interrupt, and a
// resume with the person's answer. Bundled by bundle.mjs (esbuild) for tests/test_agui_browser.py.
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const query = new URLSearchParams(location.search);
const agentId = query.get("agent");
const agent = new HttpAgent({
  url: `${query.get("base")}/api/agents/${agentId}/agui`,
  headers: { Authorization: `Bearer ${query.get("key")}` },
  threadId: query.get("thread"),
});
const forwardedProps = { resourceId: query.get("resource") };
const $ = (id) => document.getElementById(id);
$("agent").textContent = agentId;

function say(role, text) {
  const line = document.createElement("p");
  line.className = role;
  line.dataset.testid = role;
  line.textContent = `${role}: ${text}`;
  $("log").append(line);
}

function showInterrupts() {
  const box = $("interrupts");
  box.replaceChildren();
  for (const interrupt of agent.pendingInterrupts) {
    const card = document.createElement("div");
    card.className = "interrupt";
    card.dataset.testid = "interrupt";
    card.dataset.interruptId = interrupt.id;
    const title = document.createElement("strong");
    title.textContent = interrupt.reason === "tool_call" ? "Approval needed" : "Input needed";
    const message = document.createElement("p");
    message.dataset.testid = "interrupt-message";
    message.textContent = interrupt.message;
    const args = document.createElement("code");
    args.textContent = JSON.stringify(interrupt.metadata?.troupe?.args ?? {});
    const approve = document.createElement("button");
    approve.className = "approve";
    approve.textContent = "Approve";
    approve.onclick = () => answer(interrupt, { approved: true });
    const decline = document.createElement("button");
    decline.textContent = "Decline";
    decline.onclick = () => answer(interrupt, { approved: false, reason: "declined on the page" });
    card.append(title, message, args, approve, decline);
    box.append(card);
  }
}

async function run(parameters) {
  $("status").textContent = "running";
  await agent.runAgent({ forwardedProps, ...parameters }, {
    onTextMessageEndEvent: ({ textMessageBuffer }) => say("assistant", textMessageBuffer),
    onRunErrorEvent: ({ event }) => ($("status").textContent = `error ${event.code}: ${event.message}`),
    onRunFinishedEvent: ({ outcome }) => ($("status").textContent = outcome === "interrupt" ? "waiting for you" : "done"),
  });
  showInterrupts();
}

async function answer(interrupt, payload) {
  const resume = buildResumeArray(agent.pendingInterrupts, { [interrupt.id]: { status: "resolved", payload } });
  $("interrupts").replaceChildren();
  await run({ resume });
}

$("ask").onsubmit = async (event) => {
  event.preventDefault();
  const text = $("message").value;
  say("user", text);
  agent.addMessage({ id: crypto.randomUUID(), role: "user", content: text });
  await run({});
};
