"""Aleph under the agent frameworks people already use.

Each module puts the chokepoint (:class:`aleph.ScopedToolService`) under one framework's own tool
interface and maps Aleph's "ask" onto that framework's own suspend/resume:

- :mod:`aleph.integrations.pydantic_ai` — a pydantic-ai toolset; "ask" is pydantic-ai's deferred approval.
- :mod:`aleph.integrations.openai_agents` — OpenAI Agents SDK function tools; "ask" is the SDK's
  ``needs_approval`` interruption, approved or rejected on the ``RunState``.
- :mod:`aleph.integrations.langchain` — LangChain tools; "ask" is a LangGraph ``interrupt()`` in the shape of
  the human-in-the-loop middleware's per-call request.

The llm plugin ships as its own distribution, ``llm-aleph``. Importing :mod:`aleph` imports none of the
frameworks; each module imports its framework when it is imported, and says what to install if it is missing.
"""
