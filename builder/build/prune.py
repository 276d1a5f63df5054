"""Which build-hash tags no lock record references (pure: tags and records in, names out)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from builder.build.context import HASH_LEN
from builder.build.lock import BuildRecord

BUILD_HASH_TAG = re.compile(rf"^[0-9a-f]{{{HASH_LEN}}}$")


def referenced_hashes(records: Mapping[str, BuildRecord]) -> set[str]:
    out = set()
    for rec in records.values():
        out.add(rec.build_hash)
        for ref in (*rec.tags, *rec.pushed):
            out.add(ref.rsplit(":", 1)[-1])
    return out


def stale(tags: Iterable[str], records: Mapping[str, BuildRecord]) -> list[str]:
    """Tags that look like build hashes and that no record names; other tags are kept."""
    keep = referenced_hashes(records)
    return sorted(t for t in tags if BUILD_HASH_TAG.match(t) and t not in keep)
