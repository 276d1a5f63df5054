"""Talking to container registries: references, credentials, the v2 HTTP API, pinning."""
