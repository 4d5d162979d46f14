"""Running the asv suite on this machine: options, asv's config and processes, the files beside its results, and serving the dashboard."""
