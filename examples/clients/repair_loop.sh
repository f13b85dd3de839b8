#!/usr/bin/env bash
# The repair loop of a sentinel block against a running `rules serve --pack sentinel`,
# with curl only. Each model output is posted to /v1/sessions/SESSION/outputs; the server
# evaluates it, decides, records the attempt and, when a repair is due, answers with the
# prompt to send to the model.
#
#   rules serve --pack sentinel --port 8080 &
#   examples/clients/repair_loop.sh http://127.0.0.1:8080 my-session
#
# RULES_TOKEN, when set, is sent as the bearer token (a server with --token-file).
set -euo pipefail

url="${1:-${RULES_URL:-http://127.0.0.1:8080}}"
session="${2:-curl-$$}"
auth=()
if [ -n "${RULES_TOKEN:-}" ]; then
    auth=(-H "Authorization: Bearer ${RULES_TOKEN}")
fi

post() {  # post one model output of the session; the server's JSON answer on stdout
    curl -sS --fail-with-body -H 'content-type: application/json' ${auth[@]+"${auth[@]}"} \
        -d "$1" "${url}/v1/sessions/${session}/outputs"
}

field() {  # a string field of the answer's decision or verdict (the JSON is compact)
    grep -o "\"$1\":\"[^\"]*\"" | head -n 1 | cut -d '"' -f 4
}

# 1. The model's first output: ANSWER is quoted, which the VERDICT contract forbids.
first=$(post '{"pack": "sentinel", "block": "VERDICT", "nonce": "4F2C9A",
  "vars": {"criterion": "AC1"},
  "output": "<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\nANSWER=\"YES\"\nREASON=\"All acceptance criteria are satisfied\"\n<<<END_VERDICT:AC1:NONCE=4F2C9A>>>\n"}')
action=$(printf '%s' "$first" | field action)
echo "attempt 1: $(printf '%s' "$first" | field status), action ${action}"
if [ "$action" != "REPAIR" ] || ! printf '%s' "$first" | grep -q '"prompt":"IDENTITY'; then
    echo "expected REPAIR with a prompt, got: $first" >&2
    exit 1
fi
echo "the REPAIR prompt goes to the model (it begins: $(printf '%s' "$first" \
    | grep -o '"prompt":"[^\\]*' | cut -d '"' -f 4))"

# 2. The model's answer to the prompt: the corrected block.
second=$(post '{"pack": "sentinel", "block": "VERDICT", "nonce": "4F2C9A",
  "vars": {"criterion": "AC1"},
  "output": "<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\nANSWER=YES\nREASON=\"All acceptance criteria are satisfied\"\n<<<END_VERDICT:AC1:NONCE=4F2C9A>>>\n"}')
status=$(printf '%s' "$second" | field status)
action=$(printf '%s' "$second" | field action)
echo "attempt 2: ${status}, action ${action}"
if [ "$status" != "pass" ] || [ "$action" != "PROCEED" ]; then
    echo "expected a pass, got: $second" >&2
    exit 1
fi
echo "PASS: session ${session} repaired in 2 attempts"
