"""The repair loop of a sentinel block against a running `rules serve --pack sentinel`,
with httpx (`pip install httpx`).

    rules serve --pack sentinel --port 8080 &
    python examples/clients/repair_loop.py http://127.0.0.1:8080 my-session

Each model output is posted to /v1/sessions/SESSION/outputs: the server evaluates it,
decides, records the attempt and answers with the prompt to send to the model when a repair
is due. ``ask_model`` stands in for the model here: it answers a repair prompt with the
corrected block. RULES_TOKEN, when set, is sent as the bearer token.
"""

from __future__ import annotations

import os
import sys
import uuid
from typing import Any

import httpx

FIRST_OUTPUT = (
    "<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\n"
    'ANSWER="YES"\n'  # quoted: the VERDICT contract wants it bare
    'REASON="All acceptance criteria are satisfied"\n'
    "<<<END_VERDICT:AC1:NONCE=4F2C9A>>>\n"
)
FIXED_OUTPUT = FIRST_OUTPUT.replace('ANSWER="YES"', "ANSWER=YES")
MAX_ROUNDS = 5


def ask_model(prompt: str) -> str:
    """The model's answer to ``prompt`` (a real orchestrator calls its model here)."""
    assert prompt.startswith("IDENTITY"), prompt[:80]
    return FIXED_OUTPUT


def repair_loop(base_url: str, session: str) -> dict[str, Any]:
    """Post outputs until the decision is final; the last answer."""
    token = os.environ.get("RULES_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = {
        "pack": "sentinel",
        "block": "VERDICT",
        "nonce": "4F2C9A",
        "vars": {"criterion": "AC1"},
    }
    output = FIRST_OUTPUT
    with httpx.Client(base_url=base_url, headers=headers, timeout=30) as http:
        for _ in range(MAX_ROUNDS):
            response = http.post(
                f"/v1/sessions/{session}/outputs", json={**request, "output": output}
            )
            if response.status_code != 200:  # a problem document (RFC 9457)
                problem = response.json()
                raise SystemExit(f"{problem['status']} {problem['title']}: {problem['detail']}")
            answer: dict[str, Any] = response.json()
            decision = answer["decision"]
            print(
                f"attempt {answer['attempt']}: {answer['verdict']['status']}, "
                f"action {decision['action']}"
            )
            if decision["final"] or answer["prompt"] is None:
                return answer
            output = ask_model(answer["prompt"])
    raise SystemExit(f"no final decision after {MAX_ROUNDS} outputs")


def main() -> int:
    base_url = (
        sys.argv[1] if len(sys.argv) > 1 else os.environ.get("RULES_URL", "http://127.0.0.1:8080")
    )
    session = sys.argv[2] if len(sys.argv) > 2 else f"httpx-{uuid.uuid4().hex[:8]}"
    answer = repair_loop(base_url, session)
    if answer["verdict"]["status"] != "pass":
        print(f"ended with {answer['decision']['action']}: {answer['decision']['reason']}")
        return 1
    print(f"PASS: session {session} repaired in {answer['attempt']} attempts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
