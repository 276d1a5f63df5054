"""Registry credentials as a value: what the engines send in a request header and the registry
client in an Authorization header. Where they come from is builder/registry/auth.py; this module
only defines the value, so the engines and the registry code both import it without importing
each other."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Credentials:
    registry: str  # HOST[:PORT]
    username: str
    password: str = field(repr=False)
    source: str = ""  # the file they came from, for messages

    def __str__(self) -> str:
        return f"{self.username}@{self.registry} (from {self.source})"
