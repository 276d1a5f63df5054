"""Where two images differ (pure): their configuration (labels, environment, user, entrypoint,
command, creation time, history), their layer lists by diff id, and within each pair of layers
that differ, the paths added, removed or changed, with what changed (content, mode, owner,
mtime, link); a layer only one image has lists all its files as added or removed. The history
difference names its first differing step and both commands. The text says the first place a
rebuild stopped being identical."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from builder.image_diff.archive import Entry

CONFIG_KEYS = ("User", "Env", "Entrypoint", "Cmd", "WorkingDir", "ExposedPorts", "Volumes",
               "StopSignal")  # fmt: skip


@dataclass
class ImageDiff:
    config: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    layers: list[str] = field(default_factory=list)
    differing_layers: list[int] = field(default_factory=list)
    files: dict[int, list[str]] = field(default_factory=dict)

    @property
    def same(self) -> bool:
        return not (self.config or self.labels or self.layers)

    def text(self, max_files: int = 20) -> str:
        if self.same:
            return "the images have the same configuration and layers"
        out = []
        if self.labels:
            out += ["labels:", *(f"  {x}" for x in self.labels)]
        if self.config:
            out += ["configuration:", *(f"  {x}" for x in self.config)]
        if self.layers:
            out += ["layers:", *(f"  {x}" for x in self.layers)]
        for index, lines in sorted(self.files.items()):
            out.append(f"files of layer {index + 1}: {len(lines)} differ")
            out += [f"  {x}" for x in lines[:max_files]]
            if len(lines) > max_files:
                out.append(f"  ... and {len(lines) - max_files} more")
        return "\n".join(out)


def _labels(config: Mapping[str, Any]) -> dict[str, str]:
    return dict((config.get("config") or {}).get("Labels") or {})


def compare_config(a: Mapping[str, Any], b: Mapping[str, Any], diff: ImageDiff) -> None:
    la, lb = _labels(a), _labels(b)
    for key in sorted(la.keys() | lb.keys()):
        if la.get(key) != lb.get(key):
            diff.labels.append(f"{key}: {la.get(key)!r} -> {lb.get(key)!r}")
    ca, cb = a.get("config") or {}, b.get("config") or {}
    for key in CONFIG_KEYS:
        if ca.get(key) != cb.get(key):
            diff.config.append(f"{key}: {ca.get(key)!r} -> {cb.get(key)!r}")
    if a.get("created") != b.get("created"):
        diff.config.append(f"created: {a.get('created')} -> {b.get('created')}")
    ha = [h.get("created_by", "") for h in a.get("history") or ()]
    hb = [h.get("created_by", "") for h in b.get("history") or ()]
    if ha != hb:
        diff.config.append(history_difference(ha, hb))
    elif [h.get("created") for h in a.get("history") or ()] != [
        h.get("created") for h in b.get("history") or ()
    ]:
        diff.config.append("history: the same steps, made at other times")
    if not (diff.config or diff.labels):  # the rest of the document (the layers are compared apart)
        rest_a = {k: v for k, v in a.items() if k != "rootfs"}
        rest_b = {k: v for k, v in b.items() if k != "rootfs"}
        diff.config += [f"{path}: {x!r} -> {y!r}" for path, x, y in _differences(rest_a, rest_b)]


def _step(text: str, width: int = 100) -> str:
    one = " ".join(str(text).split())
    return repr(one if len(one) <= width else one[: width - 1] + "…")


def history_difference(a: list[str], b: list[str]) -> str:
    """The first history step whose command differs (1-based, as `podman history` counts from
    the base), both commands, and the step counts where they differ."""
    first = next(i for i in range(max(len(a), len(b))) if a[i : i + 1] != b[i : i + 1])
    x = _step(a[first]) if first < len(a) else "(none)"
    y = _step(b[first]) if first < len(b) else "(none)"
    counts = f" ({len(a)} steps -> {len(b)})" if len(a) != len(b) else ""
    return f"history: step {first + 1} of {max(len(a), len(b))} differs{counts}: {x} -> {y}"


def _differences(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every JSON path where `a` and `b` differ, with both values (None: absent)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out: list[tuple[str, Any, Any]] = []
        for key in sorted(a.keys() | b.keys()):
            out += _differences(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True))
                for d in _differences(x, y, f"{path}[{i}]")]  # fmt: skip
    return [] if a == b else [(path, a, b)]


def compare_layers(a: tuple[str, ...], b: tuple[str, ...], diff: ImageDiff) -> None:
    for i in range(max(len(a), len(b))):
        da = a[i] if i < len(a) else None
        db = b[i] if i < len(b) else None
        if da != db:
            diff.differing_layers.append(i)
            if da is None:
                diff.layers.append(f"layer {i + 1}: added ({str(db)[:19]}…)")
            elif db is None:
                diff.layers.append(f"layer {i + 1}: removed ({str(da)[:19]}…)")
            else:
                diff.layers.append(f"layer {i + 1}: {da[:19]}… -> {db[:19]}…")
    if diff.layers and len(a) == len(b):
        same = len(a) - len(diff.layers)
        diff.layers.insert(0, f"{same} of {len(a)} layers the same")


def _what_changed(x: Entry, y: Entry) -> str:
    parts = []
    if x.kind != y.kind:
        parts.append(f"{x.kind} -> {y.kind}")
    if x.sha256 != y.sha256 or x.size != y.size:
        parts.append(f"content {x.sha256[:12]} ({x.size} B) -> {y.sha256[:12]} ({y.size} B)")
    if x.mode != y.mode:
        parts.append(f"mode {x.mode:o} -> {y.mode:o}")
    if (x.uid, x.gid) != (y.uid, y.gid):
        parts.append(f"owner {x.uid}:{x.gid} -> {y.uid}:{y.gid}")
    if x.mtime != y.mtime:
        parts.append(f"mtime {x.mtime} -> {y.mtime}")
    if x.link != y.link:
        parts.append(f"link {x.link} -> {y.link}")
    return ", ".join(parts)


def compare_files(a: Mapping[str, Entry], b: Mapping[str, Entry]) -> list[str]:
    out = []
    for path in sorted(a.keys() | b.keys()):
        if path not in b:
            out.append(f"- {path}")
        elif path not in a:
            out.append(f"+ {path}")
        elif a[path] != b[path]:
            out.append(f"~ {path}: {_what_changed(a[path], b[path])}")
    return out
