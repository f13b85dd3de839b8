"""The folder state the examples of rounds, choices and conflicts start from: those of
`rules choose --help` and `rules conflicts --help` (a team's pack `my-pack` whose blocks
are `author` and `critic`, items `ID-3` and `ID-7`) and those of docs/format/rounds.md (the
shipped gap-review pack, items `ISSUE-R5-003` and `ISSUE-R4-007`).

The state: the contexts of rounds 3, 4 (`ctx.yaml`), 6 and 7, the author's output that
disagrees with one item and leaves the other (HIGH) unaddressed, and a session `runs/1` in
which the author failed three times in rounds 3 and 4, so that each round's escalation menu
is pending. The session is made by real `rules eval` commands, as a user's would be."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from conftest import REPO


@dataclass(frozen=True)
class Names:
    """What the examples call the pack, its writing block and the two items."""

    pack: str
    block: str
    disagreed: str  # the item the output disagrees with (an explicit conflict)
    unaddressed: str  # the HIGH item the output leaves out (a flag to convert)
    output: str  # the output file `rules conflicts detect` reads
    issues_context: str  # the context file that lists the items


HELP = Names("my-pack", "author", "ID-3", "ID-7", "out.md", "ctx.yaml")
DOCS = Names("gap-review", "engineer", "ISSUE-R5-003", "ISSUE-R4-007", "engineer.md", "round6.yaml")

MY_PACK = [
    (r"(?ms)^(rate_limits|examples|limits):.*?(?=^[a-z_]+:|\Z)", ""),
    (r"(?m)^rulepack: gap-review$", "rulepack: my-pack"),
    (r"(?m)^  engineer:$", "  author:"),
    (r"(?m)^  reviewer:$", "  critic:"),
    (r"(?m)^  engineer: engineer_prompt$", "  author: engineer_prompt"),
    (r"(?m)^  reviewer: reviewer_prompt$", "  critic: reviewer_prompt"),
    (r"block: engineer\b", "block: author"),
    (r"block: reviewer\b", "block: critic"),
    (r"blocks: \[engineer, reviewer\]", "blocks: [author, critic]"),
    (r"actions: \[engineer, gap\]", "actions: [author, gap]"),
    (r"'ISSUE-R\[0-9\]\{1,2\}-\[0-9\]\{3\}'", "'ID-[0-9]+'"),
    (r"'## DISAGREE:\\s\*ISSUE-R\(\\d\{1,2\}\)-\(\\d\{3\}\)'", r"'## DISAGREE:\\s*ID-(\\d+)'"),
    (r'"ISSUE-R\{1\}-\{2\}"', '"ID-{1}"'),
    (r"id_round: 'ISSUE-R\(\[0-9\]\{1,2\}\)-'", "id_round: 'ID-([0-9]+)'"),
]
"""The gap-review pack as a team's copy of it (`my-pack`): its blocks `author` and `critic`,
its items `ID-<n>`; without the rate limits, example attachment and prompt budget, which
the examples do not use. Each substitution must apply (a change of the shipped pack that
breaks one fails here, not in an example)."""


def write_my_pack(folder: Path) -> None:
    """``folder`` becomes `my-pack`: gap-review's templates, its pack.yaml renamed."""
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(REPO / "rules" / "gap-review" / "templates", folder / "templates")
    text = (REPO / "rules" / "gap-review" / "pack.yaml").read_text(encoding="utf-8")
    for pattern, replacement in MY_PACK:
        text, count = re.subn(pattern, replacement, text)
        assert count, pattern
    (folder / "pack.yaml").write_text(text, encoding="utf-8")


def items(names: Names) -> str:
    return f"""known_issues:
  - {{id: {names.unaddressed}, severity: HIGH, summary: Schema validation strictness,
     suggestion: Add strict mode validation that fails on unexpected keys,
     impact: Silent data loss if unexpected fields ignored, gap: GAP-FLOW-001}}
  - {{id: {names.disagreed}, severity: HIGH, summary: Retry timing mechanism,
     suggestion: "Implement 1s, 2s, 4s delays between retries",
     impact: Linear retries may overwhelm failed services, gap: GAP-FLOW-001}}
"""


def output(names: Names) -> str:
    """A proposal that disagrees with one item and says nothing of the other."""
    return (
        "## Gap Resolution: GAP-FLOW-001\n\n**Confidence:** HIGH\n\n"
        + "The proposal in detail. " * 12
        + "\n\n### Trade-offs\n\nSome.\n\n"
        + f"## DISAGREE: {names.disagreed}\n\n"
        + '**Reviewer Concern:**\n> "Implement 1s, 2s, 4s delays between retries."\n\n'
        + "**Engineer Position:**\n"
        + "Exponential backoff adds complexity for marginal benefit in this context.\n\n"
        + "**Rationale:**\n"
        + "The retry target here is local file validation, not remote services.\n"
    )


def context(round_number: int, names: Names | None = None) -> str:
    """A round's context: the known gaps, the round, the block's prompt (and the items)."""
    text = (
        f"known_gaps: [GAP-FLOW-001]\nround: {round_number}\n"
        f"original_prompt: Write the gap proposals of round {round_number}.\n"
    )
    return text + (items(names) if names else "")


def build_rounds_state(folder: Path, env: dict[str, str], names: Names) -> None:
    """Write the files and make the session `runs/1` in ``folder``, with the `rules` of
    ``env``. `ctx.yaml` is round 4's context (the examples' retry of BLOCK@4 renders with
    it); the items are in ``names.issues_context``."""
    if names.pack == "my-pack":
        write_my_pack(folder / "my-pack")
    (folder / "round3.yaml").write_text(context(3), encoding="utf-8")
    for number, name in ((4, "ctx.yaml"), (6, "round6.yaml"), (7, "round7.yaml")):
        listed = names if name in (names.issues_context, "round7.yaml") else None
        (folder / name).write_text(context(number, listed), encoding="utf-8")
    (folder / names.output).write_text(output(names), encoding="utf-8")
    (folder / "bad.md").write_text("# nothing useful here\n", encoding="utf-8")
    evals = [
        f"rules eval --pack {names.pack} --block {names.block} --context {ctx} "
        "--session runs/1 --format json bad.md"
        for ctx in ("round3.yaml", "ctx.yaml")
        for _ in range(3)
    ]
    done = subprocess.run(
        ["bash", "-c", "\n".join(evals)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    actions = re.findall(r'(?m)^    "action": "(\w+)"', done.stdout)
    assert actions == ["RETRY", "RETRY", "ESCALATE"] * 2, done.stdout + done.stderr
