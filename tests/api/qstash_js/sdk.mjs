// Calls QStash's TypeScript SDK (`@upstash/qstash`, unchanged) against Recoup's /qstash for
// tests/api/test_qstash_js_sdk.py. Reads a JSON list of calls on stdin, writes a JSON list of
// their answers on stdout, one per call: {"ok": value} or {"error": message, "status": n}.
//
// A call is {"call": "publish" | "messages.cancel" | "schedules.create" | ..., "args": [...]}:
// the client's method of that name with those arguments; or "keys" (GET /v2/keys, which the
// SDK's client reads but offers no call for), or "verify" ({signature, body, url}: the SDK's
// `Receiver` with the keys of /v2/keys, answering true or the error's message).
//
// Environment: QSTASH_JS_MODULES (the directory holding node_modules), QSTASH_URL (Recoup's
// /qstash), QSTASH_TOKEN (a Recoup API token).
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(join(process.env.QSTASH_JS_MODULES, "package.json"));
const { Client, Receiver } = require("@upstash/qstash");

const baseUrl = process.env.QSTASH_URL;
const token = process.env.QSTASH_TOKEN;
// retry: false, so a refusal is seen at once; devMode: false, so no local dev server is
// started; telemetry left on, as every user of the SDK sends it.
const client = new Client({ baseUrl, token, retry: false, devMode: false });

async function keys() {
  const response = await fetch(`${baseUrl}/v2/keys`, {
    headers: { Authorization: `Bearer ${token}` },
  });
  if (!response.ok) {
    throw Object.assign(new Error(await response.text()), { status: response.status });
  }
  return await response.json();
}

async function verify({ signature, body, url }) {
  const found = await keys();
  const receiver = new Receiver({
    currentSigningKey: found.current,
    nextSigningKey: found.next,
  });
  try {
    return await receiver.verify({ signature, body, url });
  } catch (error) {
    return `${error.name}: ${error.message}`;
  }
}

async function run({ call, args = [] }) {
  if (call === "keys") return await keys();
  if (call === "verify") return await verify(args[0]);
  const path = call.split(".");
  const method = path.pop();
  const owner = path.reduce((found, name) => found[name], client);
  const answer = await owner[method](...args);
  return answer === undefined ? null : answer;
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const answers = [];
for (const request of JSON.parse(Buffer.concat(chunks).toString())) {
  try {
    answers.push({ ok: await run(request) });
  } catch (error) {
    answers.push({ error: String(error.message ?? error), status: error.status ?? null });
  }
}
process.stdout.write(JSON.stringify(answers));
