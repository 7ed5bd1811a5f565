// The Vercel AI SDK as a door client: `node clients/aisdk.mjs responses|compatible turn|barge [N]`.
// `responses` is the default provider's model, openai("helper"), which talks the Responses API;
// `compatible` is createOpenAICompatible's chat model, which talks chat completions. A barge-in aborts the
// request (its AbortSignal) the moment the first words arrive. Prints one JSON line, as the Python clients do
// (closed_at in CLOCK_MONOTONIC seconds, the clock Python's time.monotonic() reads).
import { streamText } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";

const [kind, mode, count = "1"] = process.argv.slice(2);
const door = process.env.DOOR_URL;
const grant = process.env.DOOR_GRANT;
const name = process.env.DOOR_MODEL || "helper";
const now = () => Number(process.hrtime.bigint()) / 1e9;

const model = kind === "responses"
  ? createOpenAI({ baseURL: door, apiKey: grant })(name)
  : createOpenAICompatible({ name: "summon", baseURL: door, apiKey: grant, includeUsage: true }).chatModel(name);

async function turn(words, barge) {
  const controller = new AbortController();
  let failure = null;
  const sent = now();
  const result = streamText({
    model, prompt: words, abortSignal: controller.signal, maxRetries: 0,
    onError: ({ error }) => { failure = error; },
  });
  let first = null;
  let text = "";
  try {
    for await (const piece of result.textStream) {
      if (!piece) continue;
      first ??= now();
      text += piece;
      if (barge) {
        controller.abort();
        return { text, first_ms: (first - sent) * 1000, closed_at: now() };
      }
    }
  } catch (error) {
    if (!barge) throw error;
  }
  if (failure) throw failure;
  return { text, first_ms: first === null ? null : (first - sent) * 1000, sent_at: sent };
}

const turns = [];
try {
  for (let n = 0; n < Number(count); n++) {
    turns.push(await turn(`Tell me a long story, part ${n + 1}.`, mode === "barge"));
  }
  console.log(JSON.stringify({ turns }));
} catch (error) {
  console.log(JSON.stringify({ error: `${error?.name}: ${error?.message}`.slice(0, 400), turns }));
}
