"""Plugins.

The hook specifications (``_hookspec``), fault-isolated loading (``_loader``) and the trust record that
holds a plugin until a person approves it (``_trust``).
"""
