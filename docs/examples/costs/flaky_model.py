"""A model command for docs/costs.md: its first call is rate limited (the traceback an
openai client prints), its second answers in prose, its third answers well; each answer
reports its usage on a stderr line. The calls are counted in the file flaky.count."""

import json
import sys
from pathlib import Path

sys.stdin.read()
count = Path("flaky.count")
calls = int(count.read_text()) if count.exists() else 0
count.write_text(str(calls + 1))
if calls == 0:
    sys.exit("openai.RateLimitError: Error code: 429 - rate limit reached")
usage = {"model": "small-model", "input_tokens": 1200, "output_tokens": 40}
if calls == 1:
    print("The answer is 42.")
else:
    print('{"answer": "42"}')
    usage["output_tokens"] = 8
print("rules-usage: " + json.dumps(usage), file=sys.stderr)
