"""The tools of ``engine.mcp.tools`` served over stdio with the official `mcp` SDK (its
low-level server: the tools and their schemas are ours, declared once).

A call runs in a worker thread, so a long evaluation or a ledger write does not hold up the
messages of the connection. A refused call is a result with ``isError`` and the reason as
text, which the agent reads and can act on; a structured result carries its JSON as text
too, for clients that do not read ``structuredContent``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from engine.core.version import VERSION
from engine.mcp.tools import TOOLS, Served, ToolRefused, call
from engine.pack.compiled import Pack

if TYPE_CHECKING:
    import mcp_types as types
    from mcp.server.lowlevel import Server

INSTRUCTIONS = (
    "Check a model output against a rulepack's block before answering with it: "
    "evaluate_output gives the verdict, the decision and the repair prompt when one is due; "
    "first_prompt gives the block's first prompt with its format contract; explain_block "
    "the pack's policy."
)


def listed_tools() -> list[types.Tool]:
    """Every tool with its input and output schemas, as `tools/list` answers."""
    # Deferred for the optional extra: the `mcp` SDK comes with `rules-engine[mcp]`
    # (`rules mcp` names the extra when it is missing: ImportError).
    import mcp_types as types

    return [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema,
            output_schema=tool.output_schema,
        )
        for tool in TOOLS.values()
    ]


def build_server(served: Served) -> Server[Any]:
    """The MCP server answering the tools over ``served``."""
    # Deferred for the optional extra, as in listed_tools.
    import anyio.to_thread
    import mcp_types as types
    from mcp.server.lowlevel import Server

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed_tools())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        answer = partial(call, served, params.name, params.arguments)
        try:
            result = await anyio.to_thread.run_sync(answer)
        except ToolRefused as exc:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"error: {exc}")], is_error=True
            )
        text = json.dumps(result, ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=result
        )

    return Server(
        "rules",
        version=VERSION,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve(packs: Mapping[str, Pack], sessions_dir: str, ledger: str | None) -> None:
    """Serve the tools over ``packs`` on stdin and stdout until the client closes stdin
    (a tool's ``session`` records under ``sessions_dir``, or in ``ledger`` when given)."""
    # Deferred for the optional extra, as in listed_tools.
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server(Served(packs, sessions_dir, ledger))

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
