"""The tool_call contract kind: tool calls checked against the tools a pack declares."""
