"""aleph-memory."""
