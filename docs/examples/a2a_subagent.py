from troupe import A2AAgent, Agent
from troupe.testing import ScriptedModel, text

vendor = A2AAgent(
    "vendor",  # the supervisor's model sees the tool "agent-vendor", taking {"prompt": ...}
    card_url="https://agents.example.com/a2a/records/",  # or card={...} (the card's JSON)
    bearer_token="...",  # or headers={...}: sent with every request, never shown in its repr
)
desk = Agent("desk", model=ScriptedModel([text("...")]), agents={"vendor": vendor})
print(sorted(desk.agents), vendor)
