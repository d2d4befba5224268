"""aleph-template: rename me."""
