"""The command-policy floor: what a shell command may never do, whatever tier or rule allows the tool.

``_parse`` reads bash into a tree, ``_analysis`` lists every command the tree would run, ``_wrappers``
says what a wrapper (``env``, ``sudo``, ``xargs``, ``bash -c`` ...) runs in turn, ``_rules`` holds the
built-in rules, and ``_policy`` combines them into :class:`~aleph.CommandPolicy`.
"""
