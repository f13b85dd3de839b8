// The repair loop of a sentinel block against a running `rules serve --pack sentinel`,
// with Node.js's built-in fetch (Node 18 or later; no package).
//
//   rules serve --pack sentinel --port 8080 &
//   node examples/clients/repair_loop.mjs http://127.0.0.1:8080 my-session
//
// Each model output is posted to /v1/sessions/SESSION/outputs: the server evaluates it,
// decides, records the attempt and answers with the prompt to send to the model when a
// repair is due. askModel stands in for the model here. RULES_TOKEN, when set, is sent as
// the bearer token.

const FIRST_OUTPUT =
  "<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\n" +
  'ANSWER="YES"\n' + // quoted: the VERDICT contract wants it bare
  'REASON="All acceptance criteria are satisfied"\n' +
  "<<<END_VERDICT:AC1:NONCE=4F2C9A>>>\n";
const FIXED_OUTPUT = FIRST_OUTPUT.replace('ANSWER="YES"', "ANSWER=YES");
const MAX_ROUNDS = 5;

function askModel(prompt) {
  // a real orchestrator sends the prompt to its model here
  if (!prompt.startsWith("IDENTITY")) throw new Error(`unexpected prompt: ${prompt.slice(0, 80)}`);
  return FIXED_OUTPUT;
}

async function repairLoop(baseUrl, session) {
  const headers = { "content-type": "application/json" };
  if (process.env.RULES_TOKEN) headers.authorization = `Bearer ${process.env.RULES_TOKEN}`;
  const request = { pack: "sentinel", block: "VERDICT", nonce: "4F2C9A", vars: { criterion: "AC1" } };
  let output = FIRST_OUTPUT;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const response = await fetch(`${baseUrl}/v1/sessions/${encodeURIComponent(session)}/outputs`, {
      method: "POST",
      headers,
      body: JSON.stringify({ ...request, output }),
      signal: AbortSignal.timeout(30_000),
    });
    const answer = await response.json();
    if (!response.ok) {
      // a problem document (RFC 9457)
      throw new Error(`${answer.status} ${answer.title}: ${answer.detail}`);
    }
    console.log(`attempt ${answer.attempt}: ${answer.verdict.status}, action ${answer.decision.action}`);
    if (answer.decision.final || answer.prompt === null) return answer;
    output = askModel(answer.prompt);
  }
  throw new Error(`no final decision after ${MAX_ROUNDS} outputs`);
}

const baseUrl = process.argv[2] ?? process.env.RULES_URL ?? "http://127.0.0.1:8080";
const session = process.argv[3] ?? `node-${process.pid}`;
try {
  const answer = await repairLoop(baseUrl, session);
  if (answer.verdict.status !== "pass") {
    console.log(`ended with ${answer.decision.action}: ${answer.decision.reason}`);
    process.exit(1);
  }
  console.log(`PASS: session ${session} repaired in ${answer.attempt} attempts`);
} catch (error) {
  console.error(`error: ${error.message}`);
  process.exit(1);
}
