"""`rules mcp`: the engine as an MCP server over stdio, for agents that check their own
outputs (the `mcp` extra)."""

from __future__ import annotations

import json

import click

from engine.cli.common import UsageFailure
from engine.cli.opening import open_pack
from engine.cli.options import pack_option
from engine.cli.session_options import ledger_option, sessions_dir_option
from engine.mcp import stdio
from engine.pack.compiled import Pack
from engine.session.recording import ledger_problem

EXTRA_HINT = "`rules mcp` needs the mcp extra: pip install 'rules-engine[mcp]'"


@click.command("mcp")
@pack_option("A pack the tools serve: builtin name, folder or file (repeatable).", False, True)
@sessions_dir_option(
    "Folder of the sessions' ledgers, for the tools' `session` argument (one folder "
    "per session name).",
)
@ledger_option(
    "One ledger for every session, sessions by name: a path or sqlite:///path, or "
    "postgresql://user@host:port/dbname. Default: $RULES_LEDGER, else one folder per "
    "session under --sessions-dir.",
)
@click.option(
    "--print-tools",
    is_flag=True,
    help="Write the tools with their input and output schemas as JSON and exit.",
)
def mcp_command(
    pack_refs: tuple[str, ...], sessions_dir: str, ledger_url: str | None, print_tools: bool
) -> None:
    """Serve packs to an MCP client over stdio (the official `mcp` SDK).

    The tools: evaluate_output (verdict, decision and the repair prompt when one is due),
    repair_prompt (the prompt the decision calls for), first_prompt (a block's first
    prompt) and explain_block (the pack's policy as data), each with an outputSchema. With
    their `session` argument an attempt is counted and recorded in that session's ledger,
    as POST /v1/sessions/{session}/outputs records it. Packs are checked at start; the
    server runs until the client closes its stdin. An MCP client starts it: see
    docs/mcp.md for a configuration.

    \b
    Exit status:
      0  the client closed the connection
      2  usage or pack error, the mcp extra missing

    \b
    Examples:
      rules mcp --pack sentinel
      rules mcp --pack sentinel --pack ./my-pack --sessions-dir sessions
      rules mcp --pack sentinel --ledger rules.db               # a file here
      rules mcp --print-tools > tools.json
    """
    try:  # the SDK is imported when first used (engine.mcp.stdio): named when missing
        import mcp_types  # noqa: F401  # the optional extra, checked before any pack loads
    except ImportError as exc:
        raise UsageFailure(f"{EXTRA_HINT} ({exc.name or exc} is not installed)") from None
    if print_tools:
        tools = [tool.model_dump(by_alias=True, exclude_none=True) for tool in stdio.listed_tools()]
        click.echo(json.dumps(tools, indent=2, ensure_ascii=False))
        return
    if not pack_refs:
        raise UsageFailure("name at least one pack to serve: --pack NAME")
    packs: dict[str, Pack] = {}
    for ref in pack_refs:
        pack = open_pack(ref)
        if pack.name in packs:
            raise UsageFailure(f"--pack {ref}: a second pack named {pack.name!r}")
        packs[pack.name] = pack
    if ledger_url and (problem := ledger_problem(ledger_url, sessions_dir)):
        raise UsageFailure(f"{problem}; the MCP server did not start")
    stdio.serve(packs, sessions_dir, ledger_url or None)
