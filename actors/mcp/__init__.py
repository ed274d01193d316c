"""MCP servers as an agent's tool sources, hosted by its agent host (sessions never leave the process
that opened them). ``troupe.actors.mcp.sources.MCPSources`` is what a host holds; ``mcp`` itself is
imported only once a session opens."""
