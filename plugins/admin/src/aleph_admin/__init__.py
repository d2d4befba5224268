"""aleph-admin: agents, identity, secrets and self-management as tools (entry point ``admin``).

For integrations: :func:`session_model` reads the model ``select_model`` chose for a session.
"""

from aleph_admin._runtime_tools import session_model

__all__ = ["session_model"]
