"""Agent2Agent (A2A): remote A2A agents as subagents (``A2AAgent``), and the data both sides of
Troupe's A2A speak about paused calls (``troupe.actors.a2a.pending``). Needs
``pip install troupe-runtime[a2a]`` (the official ``a2a-sdk``) where a remote agent is called."""
