// Drives sagents-django's AG-UI endpoint with the official JavaScript client
// (@ag-ui/client's HttpAgent, its event verification and its way of applying
// events), for tests/agui/test_js_client.py. Prints one JSON object: what the
// client holds at the end.
//
//   node drive.mjs <scenario>   with AGUI_URL, AGUI_REJOIN_URL, AGUI_TOKEN, AGUI_THREAD
//
// Scenarios: "turn" (a message answered), "approval" (a paused run, then resume[]),
// "reconnect" (the client leaves mid-stream and rejoins another web process with
// the last SSE id it read, through connectAgent()).
import {
  HttpAgent,
  buildResumeArray,
  runHttpRequest,
  transformHttpEventStream,
} from "@ag-ui/client";

const { AGUI_URL, AGUI_REJOIN_URL, AGUI_TOKEN, AGUI_THREAD } = process.env;

// HttpAgent reads only the data lines of SSE; a client of the resume extension
// keeps the last id it saw (what a browser's EventSource does for it).
class ResumableAgent extends HttpAgent {
  constructor(config) {
    super({ ...config, fetch: (url, init) => this.tracked(url, init) });
    this.lastEventId = null;
    this.onChunk = null;
  }

  async tracked(url, init) {
    const response = await fetch(url, init);
    if (!response.ok || !response.body) return response;
    const decoder = new TextDecoder();
    let buffer = "";
    const agent = this;
    const body = response.body.pipeThrough(
      new TransformStream({
        transform(chunk, controller) {
          buffer += decoder.decode(chunk, { stream: true });
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            for (const line of buffer.slice(0, end).split("\n")) {
              if (line.startsWith("id: ")) agent.lastEventId = line.slice(4);
            }
            buffer = buffer.slice(end + 2);
          }
          controller.enqueue(chunk);
          if (agent.onChunk) agent.onChunk(agent);
        },
      }),
    );
    return new Response(body, { status: response.status, headers: response.headers });
  }

  // connectAgent(): rejoin the thread's stream where the client left it.
  connect(input) {
    const base = this.rejoinUrl ?? this.url.replace(/agui\/$/, "");
    const url = `${base}agui/${input.threadId}/?runId=${encodeURIComponent(input.runId)}`;
    const headers = { ...this.headers, Accept: "text/event-stream" };
    if (this.lastEventId) headers["Last-Event-ID"] = this.lastEventId;
    return transformHttpEventStream(
      runHttpRequest(() => this.fetch(url, { method: "GET", headers })),
    );
  }
}

function newAgent() {
  return new ResumableAgent({
    url: `${AGUI_URL}agui/`,
    headers: { Authorization: `Bearer ${AGUI_TOKEN}` },
    threadId: AGUI_THREAD,
  });
}

function say(agent, text) {
  agent.addMessage({ id: `js-${Date.now()}`, role: "user", content: text });
}

function recorder() {
  const seen = { types: [], outcomes: [], interrupts: [] };
  return {
    seen,
    subscriber: {
      onEvent({ event }) {
        seen.types.push(event.type);
      },
      onRunFinishedEvent(params) {
        seen.outcomes.push(params.outcome);
        if (params.outcome === "interrupt") seen.interrupts = params.interrupts;
      },
    },
  };
}

async function turn() {
  const agent = newAgent();
  const { seen, subscriber } = recorder();
  say(agent, "Plan, then answer");
  await agent.runAgent({}, subscriber);
  return { ...seen, messages: agent.messages, state: agent.state };
}

async function approval() {
  const agent = newAgent();
  const { seen, subscriber } = recorder();
  say(agent, "Write it");
  await agent.runAgent({}, subscriber);
  const paused = agent.pendingInterrupts.map((i) => i.id);
  const responses = Object.fromEntries(
    agent.pendingInterrupts.map((i) => [i.id, { status: "resolved", payload: { approved: true } }]),
  );
  await agent.runAgent({ resume: buildResumeArray(agent.pendingInterrupts, responses) }, subscriber);
  return { ...seen, paused, pending: agent.pendingInterrupts, messages: agent.messages };
}

async function reconnect() {
  const agent = newAgent();
  const { seen, subscriber } = recorder();
  let textSeen = 0;
  const left = new Promise((resolve) => {
    agent.onChunk = (a) => {
      const streaming = a.messages.filter((m) => m.role === "assistant");
      textSeen = streaming.length ? (streaming.at(-1).content ?? "").length : 0;
      if (textSeen > 40 && a.lastEventId) {
        a.onChunk = null;
        a.abortRun(); // the client goes; the run does not
        resolve(a.lastEventId);
      }
    };
  });
  say(agent, "Count for me");
  const first = agent.runAgent({}, subscriber).catch((e) => ({ error: String(e) }));
  const leftAt = await left;
  await first;
  const shownWhenLeaving = textSeen;
  agent.rejoinUrl = AGUI_REJOIN_URL;
  await agent.connectAgent({}, subscriber);
  return { ...seen, leftAt, shownWhenLeaving, messages: agent.messages };
}

const scenarios = { turn, approval, reconnect };
const result = await scenarios[process.argv[2]]();
process.stdout.write(JSON.stringify(result));
