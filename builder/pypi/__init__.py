"""PyPI's own metadata, read directly: the index's PEP 691 JSON and PEP 658 .metadata files,
never through pip's resolver (a user's pip constraints would hide releases)."""
