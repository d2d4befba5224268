"""aleph-interop: other agents under Aleph's policy (ACP coding agents, A2A agents, mixture of agents, ClawHub)."""

__all__: list[str] = []
