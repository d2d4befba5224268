"""aleph-example: text statistics and a clock, registered through the ``aleph`` entry point."""
