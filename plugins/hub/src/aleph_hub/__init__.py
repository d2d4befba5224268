"""aleph-hub: Agent Skills and Aleph plugins from a package index, installed like permission changes."""
