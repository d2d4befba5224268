"""Aleph teams family."""
