// The @a2a-js/sdk client against an agency served over A2A: reads the card, streams one message, prints JSON lines.
// node client.mjs BASE_URL CONTEXT_ID (the bearer token comes from $A2A_TOKEN)
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory } from "@a2a-js/sdk/client";

const [baseUrl, contextId, binding] = process.argv.slice(2);
const token = process.env.A2A_TOKEN;
const authorized = (input, init = {}) => {
  const headers = new Headers(init.headers || {});
  headers.set("Authorization", `Bearer ${token}`);
  return fetch(input, { ...init, headers });
};
const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory({ fetchImpl: authorized }), new RestTransportFactory({ fetchImpl: authorized })],
  preferredTransports: [binding],
});
const card = await (await fetch(`${baseUrl}/.well-known/agent-card.json`)).json();
console.log(JSON.stringify({ card: card.name, skills: card.skills.map((skill) => skill.name) }));
const client = await new ClientFactory(options).createFromUrl(baseUrl);
const message = {
  messageId: `js-${Date.now()}`, contextId, taskId: "", role: 1, metadata: undefined, extensions: [],
  referenceTaskIds: [], parts: [{ content: { $case: "text", value: "[qa] from node" }, metadata: undefined, filename: "", mediaType: "" }],
};
for await (const response of client.sendMessageStream({ tenant: "", message, configuration: undefined, metadata: undefined })) {
  const payload = response.payload;
  const value = payload.value;
  const line = { kind: payload.$case };
  if (payload.$case === "statusUpdate") {
    line.state = value.status.state;
    line.agent = value.status.message?.metadata?.agency_swarm?.agent;
    line.depth = value.status.message?.metadata?.agency_swarm?.depth;
  } else if (payload.$case === "artifactUpdate") {
    line.text = value.artifact.parts.map((part) => part.content?.value).join("");
  }
  console.log(JSON.stringify(line));
}
