"""The typed tool contract.

Tools (``_tool``), their definitions and facts (``_types``), JSON Schema (``_schema``), the shared
registry (``_registry``), the ``ToolService`` protocol (``_service``) and tool-name repair (``_names``).
"""
