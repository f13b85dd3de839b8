"""`rules mcp`: the engine as an MCP server over stdio (the `mcp` extra).

``tools`` declares the tools (their input and output schemas) and answers each call through
the use cases of ``engine.session``, as the HTTP server's routes do; ``stdio`` serves them
with the official `mcp` SDK, the one module that imports it.
"""
