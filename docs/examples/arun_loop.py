import asyncio

import engine


async def fake_model(prompt: str) -> str:
    """A stand-in for an async client: a quoted ANSWER first, a good one when repaired."""
    await asyncio.sleep(0.05)  # the network
    answer = "YES" if "format-repair agent" in prompt else '"YES"'
    return (
        "<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\n"
        f"ANSWER={answer}\n"
        'REASON="All acceptance criteria are satisfied"\n'
        "<<<END_VERDICT:AC1:NONCE=4F2C9A>>>\n"
    )


async def main() -> None:
    result = await engine.arun(
        "sentinel",
        "VERDICT",
        fake_model,
        prompt="Judge acceptance criterion AC1 and answer with one VERDICT block.",
        nonce="4F2C9A",
        vars={"criterion": "AC1"},
        session="runs/python",
        timeout=60,
    )
    for attempt in result.attempts:
        print(attempt.decision.attempt, attempt.verdict.status, attempt.decision.action)
    print(result.decision.action, result.data)


asyncio.run(main())
