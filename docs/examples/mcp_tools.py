from troupe import Agent, MCPHttp, MCPStdio
from troupe.testing import ScriptedModel, text

files = MCPStdio(
    "files",  # the server's name (shown to approvers)
    "npx",
    ["-y", "@modelcontextprotocol/server-filesystem", "/srv/shared"],
    env={"SOME_TOKEN": "..."},  # the server gets only this (and PATH, HOME, USER...)
    require_approval={"never": ["read_text_file"], "always": ["write_file"]},
)
tickets = MCPHttp("tickets", "https://mcp.example.com/mcp", headers={"Authorization": "Bearer ..."})
agent = Agent("ops", model=ScriptedModel([text("...")]), mcp_servers=[files, tickets])
print([server.name for server in agent.mcp_servers])  # sessions open when its host starts, not here
