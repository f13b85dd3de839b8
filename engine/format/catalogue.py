"""Every finding id `rules check` can report: what it means and how to fix it.

`rules check --list-rules` prints this table; SARIF output names these rules. A test reads
the engine's source and fails when a finding id is missing here, so it cannot drift.
"""

from __future__ import annotations

from typing import NamedTuple


class Rule(NamedTuple):
    description: str
    fix: str


RULES: dict[str, Rule] = {
    # reading the YAML
    "yaml-syntax": Rule(
        "The YAML does not parse, or holds a control character.",
        "Fix the YAML at the position shown; control characters (NUL...) are not allowed.",
    ),
    "yaml-duplicate-key": Rule(
        "A mapping has the same key twice.",
        "Keep one of the two; the later one would silently win.",
    ),
    "yaml-too-large": Rule(
        "The file or its alias expansion is over the size or node limit.",
        "Split the pack or remove the aliases that multiply nodes.",
    ),
    "yaml-encoding": Rule("The file is not UTF-8 text.", "Save the file as UTF-8."),
    "yaml-unsupported-tag": Rule(
        "A YAML tag (e.g. !!python/object) the engine does not read.",
        "Remove the tag: packs are plain data.",
    ),
    "yaml-complex-key": Rule("A mapping key that is not a scalar.", "Use a string key."),
    "yaml-merge-key": Rule("A YAML merge key (<<:).", "Write the keys out, or use `extends`."),
    "file-unreadable": Rule("A pack file cannot be read.", "Check the path and its permissions."),
    "number-out-of-range": Rule(
        "A number is an infinity, NaN, or an integer beyond 64 bits.",
        "Write a finite number within 64 bits, or quote it to make it a string.",
    ),
    "pack-empty": Rule(
        "The pack file is empty.", "Start from `rules init` or add `rulepack: NAME`."
    ),
    "pack-not-mapping": Rule(
        "The pack file is not a YAML mapping.",
        "A pack is a mapping with `rulepack:` and its sections.",
    ),
    "pack-invalid": Rule(
        "The pack could not be loaded.", "Run `rules check` on it and fix the errors it lists."
    ),
    # extends
    "extends-cycle": Rule(
        "Packs extend each other in a cycle.", "Remove one of the `extends` entries in the cycle."
    ),
    "extends-not-found": Rule(
        "An `extends` entry names no pack.", "Use builtin:NAME, a pack folder or a pack file."
    ),
    "extends-absolute": Rule(
        "An `extends` entry is an absolute path.", "Use a path relative to the pack file."
    ),
    "extends-outside-workspace": Rule(
        "An `extends` entry points outside the workspace.",
        "Extend builtin packs or packs inside the repository.",
    ),
    "git-ref-invalid": Rule(
        "An `extends` git reference is not git+URL@REV#path.", "Write git+URL@REV#path/to/pack."
    ),
    "git-path-outside": Rule(
        "A git reference's pack path leaves the repository.", "Give a path inside the repository."
    ),
    "git-fetch-failed": Rule(
        "A git pack cannot be resolved or fetched.",
        "Check the URL, the revision and the path; git must be installed.",
    ),
    "git-unlocked": Rule(
        "A git reference without a rules.lock entry under --locked (CI=true).",
        "Run `rules lock` beside the top pack and commit rules.lock.",
    ),
    "git-hash-mismatch": Rule(
        "A fetched git pack's content differs from its locked hash.",
        "Run `rules lock --upgrade` if the change is intended; else clear the cache.",
    ),
    "git-lock-invalid": Rule("rules.lock cannot be read.", "Run `rules lock` again."),
    # the format
    "unknown-key": Rule(
        "A key the format does not have here.",
        "Fix the spelling (the message suggests the closest key) or remove it.",
    ),
    "missing-key": Rule("A required key is missing.", "Add the key (see `rules schema`)."),
    "invalid-value": Rule(
        "A value of the wrong type or form.", "See `rules schema` for what the key accepts."
    ),
    "out-of-range": Rule(
        "A number outside its allowed range.", "Use a value inside the range the message gives."
    ),
    "unknown-kind": Rule(
        "A contract `kind` the engine does not know.", "Use sentinel, markdown, json or text."
    ),
    # references
    "unknown-failure-type": Rule(
        "A failure type that is not declared.", "Declare it under `failure_types:` or fix the name."
    ),
    "unknown-severity": Rule(
        "A severity that is not declared.", "Declare it under `severities:` or fix the name."
    ),
    "unknown-template": Rule(
        "A template that is not declared.", "Declare it under `templates:` or fix the name."
    ),
    "unknown-contract": Rule(
        "A block that has no contract.", "Declare it under `contracts:` or fix the name."
    ),
    "unknown-action": Rule(
        "An action that is neither standard nor declared.",
        "Declare it under `actions:` or use a standard action.",
    ),
    "unknown-context-key": Rule(
        "A context key that is not declared.", "Declare it under `context:`."
    ),
    "unknown-item-part": Rule(
        "`session.item` names something unknown.", "Use nonce, params or a declared context key."
    ),
    "unknown-field": Rule("A field a contract does not have.", "Use one of the contract's fields."),
    "unknown-param": Rule(
        "A block parameter its delimiters do not name.", "Name it in the opener, or fix the name."
    ),
    "unknown-grammar": Rule(
        "`grammar:` names no sentinel contract.", "Name another sentinel contract of the pack."
    ),
    "unknown-group": Rule(
        "A template names a capture group the pattern does not have.",
        "Use {1}..{N} for the pattern's groups.",
    ),
    "unknown-sections": Rule(
        "A coverage check names no sections check.",
        "Name a `check: sections` of the same contract.",
    ),
    "unknown-menu": Rule(
        "An after-failure menu that is not declared.", "Declare it under `menus:`."
    ),
    "unknown-check": Rule("A check refers to a check that does not exist.", "Fix the name."),
    "unknown-message": Rule(
        "A message override for a rule the contract does not have.",
        "Use the ids the contract's rules have.",
    ),
    "unknown-schema": Rule(
        "A gate names a schema that is not declared.", "Declare it under `gates.schemas`."
    ),
    "unknown-state": Rule(
        "A termination rule names a state that is not declared.", "Add it to `termination.states`."
    ),
    "no-capture-group": Rule(
        "An id pattern has no capture group where one is needed.", "Add a group around the id."
    ),
    # files
    "file-missing": Rule(
        "A file the pack names does not exist.", "Create the file or fix the path."
    ),
    "path-absolute": Rule("A pack path is absolute.", "Use a path relative to the pack file."),
    "path-traversal": Rule(
        "A pack path climbs out with `..`.", "Keep files inside the pack folder."
    ),
    "path-escape": Rule(
        "A pack path resolves outside the pack (e.g. a symlink).",
        "Keep files inside the pack folder.",
    ),
    # templates
    "template-syntax": Rule(
        "A template does not compile in the Jinja2 sandbox.", "Fix the template at the line shown."
    ),
    "template-encoding": Rule(
        "A template file is not text (NUL bytes, not UTF-8).", "Save it as UTF-8 text."
    ),
    "template-too-large": Rule(
        "A template file is over 1 MiB.", "Split it or move text out of it."
    ),
    "template-purpose": Rule(
        "A gate uses a template of another purpose.", "Give it `purpose: reprompt` or `artifact`."
    ),
    "wrong-template-purpose": Rule(
        "A template is used for a purpose it was not declared for.",
        "Fix the template's `purpose:`.",
    ),
    "unknown-template-variable": Rule(
        "A template uses a variable the engine does not provide.",
        "Use the variables of its purpose or declared context keys.",
    ),
    "unsafe-template": Rule(
        "A template does something the sandbox refuses at render.",
        "Remove `_` attributes, includes and huge constant ranges.",
    ),
    # patterns and expressions
    "invalid-pattern": Rule(
        "A pattern does not compile on RE2.",
        "No look-arounds or back-references: RE2 syntax, linear time.",
    ),
    "invalid-expression": Rule(
        "A condition expression does not compile.", "Fix the expression (Jinja2 expression syntax)."
    ),
    "unknown-variable": Rule(
        "An expression uses a variable it does not have.", "Use the variables the message lists."
    ),
    "unsafe-expression": Rule(
        "An expression does something the sandbox refuses.",
        "Remove `_` attributes and unsafe calls.",
    ),
    "expression-too-large": Rule(
        "An expression is over 4,000 characters or 40 brackets deep.",
        "Split it into several conditions.",
    ),
    # contracts, gates, limits, policies
    "delimiter-without-nonce": Rule(
        "A sentinel opener or closer without {nonce}.", "Put NONCE={nonce} in both delimiters."
    ),
    "invalid-range": Rule("A minimum above its maximum.", "Swap or fix the bounds."),
    "invalid-schema": Rule(
        "A JSON Schema that is invalid or refers outside itself.",
        "Fix the schema; `$ref`s stay inside it.",
    ),
    "gates-no-detection": Rule("Gates without detection rules.", "Add `gates.detect` rules."),
    "gates-no-decision": Rule("Gates without decision rules.", "Add `gates.decide` rules."),
    "gates-empty-log": Rule("A gate log with an empty path.", "Give `gates.log` a file path."),
    "invalid-message": Rule(
        "A message uses an unknown figure or a bad format spec.",
        "Use the figures the message lists.",
    ),
    "duplicate-limit": Rule(
        "Two rate limits of a block have the same name.", "Rename one of them."
    ),
    "duplicate-option": Rule("Two options with the same label.", "Rename one of them."),
    "invalid-window": Rule(
        "A rate limit's min_rounds does not fit its window.",
        "Make min_rounds at most the window's rounds.",
    ),
    "not-retriable": Rule(
        "A trigger retries a failure type declared `retriable: false`.",
        "Remove it from `on:` or declare it retriable.",
    ),
    "requires-unmet": Rule(
        "The running engine is outside the pack's `requires` range.",
        "Upgrade the engine or relax `requires`.",
    ),
    "pack-test-failed": Rule(
        "A case of the pack's own tests failed (`rules check --tests`).",
        "Run `rules test` for the differences; fix the pack or the case.",
    ),
    "pack-test-unreadable": Rule(
        "A case of the pack's own tests cannot be read.", "Fix the case file at the position shown."
    ),
    "no-behaviour": Rule(
        "A key this engine does not act on yet (warning).",
        "Remove it, or keep it for a later engine version.",
    ),
}


def describe(rule: str) -> Rule:
    """The catalogue entry of ``rule`` (a generic one for an id that is not listed)."""
    return RULES.get(rule, Rule(rule, "See the finding's fix."))
