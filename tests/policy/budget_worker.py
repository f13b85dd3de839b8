"""One worker of the fleet budget test (test_budget_fleet.py): runs ITEMS items of block
VERDICT on the shared ledger, each answered badly first and well to a repair; prints one
JSON line per item: its name, the model calls made, the final action and its reason.

Usage: budget_worker.py PACK LEDGER_URL WORKER ITEMS START_AT
(START_AT: a time.time() to wait for, so every worker starts at once)."""

from __future__ import annotations

import json
import sys
import time

import engine

GOOD = (
    "<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\nANSWER=YES\n"
    'REASON="All acceptance criteria are satisfied"\n<<<END_VERDICT:AC1:NONCE=4F2C9A>>>\n'
)
BAD = "this output holds no VERDICT block at all, and it is longer than fifty characters"


def main() -> None:
    pack_path, url, worker, items, start_at = sys.argv[1:6]
    pack = engine.load_pack(pack_path)
    time.sleep(max(0.0, float(start_at) - time.time()))
    for n in range(int(items)):
        script = [BAD, GOOD]

        def model(prompt: str, script: list[str] = script) -> str:
            return script.pop(0)

        result = engine.run(
            pack,
            "VERDICT",
            model,
            prompt="Judge AC1.",
            nonce="4F2C9A",
            vars={"criterion": "AC1"},
            item=f"w{worker}-{n}",
            session=f"worker-{worker}",
            ledger=url,
        )
        line = {
            "item": f"w{worker}-{n}",
            "calls": 2 - len(script),
            "action": result.decision.action,
            "reason": result.decision.reason,
        }
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
