// The official AG-UI client (@ag-ui/client's HttpAgent) against a running `agency-swarm serve --ag-ui`: each scenario
// runs through the client's own pipeline, whose verifier rejects any event out of order. Prints one JSON line per
// run: {scenario, run, ok, error?, types, result, interrupts, messages}; tests/protocols/test_ag_ui_js.py reads them.
//
//   node tests/js/ag_ui_client.mjs http://127.0.0.1:PORT   (the bearer token in AG_UI_TOKEN)
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [url] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${process.env.AG_UI_TOKEN}` };

async function run(agent, scenario, label, parameters) {
  const types = [];
  const report = { scenario, run: label, ok: true, types };
  try {
    const outcome = await agent.runAgent(parameters, {
      onEvent: ({ event }) => {
        types.push(event.type);
      },
    });
    report.result = outcome.result ?? null;
  } catch (error) {
    report.ok = false;
    report.error = String(error && error.message ? error.message : error);
  }
  report.interrupts = agent.pendingInterrupts.map((interrupt) => interrupt.id);
  report.messages = agent.messages.map((message) => ({
    role: message.role,
    name: message.name ?? null,
    subagentRunId: message.subagentRunId ?? null,
    content: typeof message.content === "string" ? message.content : null,
    toolCalls: (message.toolCalls ?? []).map((call) => call.function.name),
  }));
  console.log(JSON.stringify(report));
  return report;
}

function agentFor(threadId, text) {
  const agent = new HttpAgent({ url: `${url}/ag-ui`, headers, threadId });
  agent.addMessage({ id: `user-${threadId}`, role: "user", content: text });
  return agent;
}

async function scenario(name, text, decide) {
  const threadId = `js-${name}-${Date.now()}`;
  const agent = agentFor(threadId, text);
  const first = await run(agent, name, "first", { runId: `${threadId}-1` });
  if (decide && first.interrupts.length > 0) {
    const responses = Object.fromEntries(agent.pendingInterrupts.map((interrupt) => [interrupt.id, decide]));
    const resume = buildResumeArray(agent.pendingInterrupts, responses);
    await run(agent, name, "resume", { runId: `${threadId}-2`, resume });
  }
  if (name === "retry") {
    await run(agent, name, "again", { runId: `${threadId}-1` });
  }
}

await scenario("nested", "Build it");
await scenario("approve", "approve the deploy", { status: "resolved", payload: { approved: true } });
await scenario("reject", "approve the deploy", {
  status: "resolved",
  payload: { approved: false, message: "Not today." },
});
await scenario("toolerror", "toolerror now");
await scenario("suberror", "suberror now");
await scenario("modelerror", "modelerror now");
await scenario("retry", "Build it");
