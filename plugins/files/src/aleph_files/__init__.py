"""aleph-files: workspace-confined file tools, V4A patches, a guarded web fetcher and pluggable search."""
