"""The teams family's tools, one module per group."""
