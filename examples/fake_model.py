"""A stand-in for a model CLI: reads a prompt on stdin, writes an answer on stdout.

For a format-repair prompt it answers with a well-formed VERDICT block that uses the nonce
and criterion the prompt asks for; for anything else it answers with a malformed block first
(so a pipeline has something to repair). Use it where a real model command would go.
"""

from __future__ import annotations

import re
import sys


def main() -> None:
    prompt = sys.stdin.read()
    nonce = re.search(r"NONCE[:=] ?([0-9A-F]{6})", prompt)
    criterion = re.search(r"Criterion ID \(if VERDICT\): (\S+)", prompt)
    n = nonce.group(1) if nonce else "4F2C9A"
    c = criterion.group(1) if criterion else "AC1"
    answer = "YES" if "format-repair agent" in prompt else '"YES"'
    print(f"<<<VERDICT:V1:{c}:NONCE={n}>>>")
    print(f"ANSWER={answer}")
    print('REASON="All acceptance criteria are satisfied"')
    print(f"<<<END_VERDICT:{c}:NONCE={n}>>>")


if __name__ == "__main__":
    main()
