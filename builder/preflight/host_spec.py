"""`--hosts` values held to the inventory's patterns (builder/preflight/inventory.py): a spec is
parsed into validated Connection fields, which testinfra gets as arguments, never as URL text."""

from __future__ import annotations

from builder.preflight.inventory import (
    _CONTAINER,
    _KEY_PATH,
    _USER,
    Connection,
    InventoryError,
    Target,
    _address,
    _Invalid,
    _port,
    _shaped,
)

_SCHEMES = ("local", "ssh", "paramiko", "podman", "docker")
_SPEC_OPTIONS = ("sudo", "sudo_user", "ssh_identity_file")


def target_from_spec(spec: str) -> Target:
    """A `--hosts` value, held to the inventory's patterns: `local://`, `ssh://[user@]host[:port]`
    (`paramiko://` alike), `podman://NAME`, `docker://NAME`, with `?sudo=true`,
    `?sudo_user=USER` or `?ssh_identity_file=PATH` only. The fields go to testinfra as
    arguments (connect_validated), so `ssh://-oProxyCommand=...` or `?ssh_config=FILE` never
    reach ssh: a spec of any other shape makes that host unusable (its `host.reach` finding
    says why), as a wrong inventory value does."""
    try:
        return _spec_target(spec)
    except InventoryError as exc:
        return Target(spec, None, str(exc))


def _spec_target(spec: str) -> Target:
    scheme, sep, rest = spec.partition("://")
    if not sep or scheme not in _SCHEMES:
        raise InventoryError(
            f"--hosts {spec!r}: not a host spec (expected one of "
            + ", ".join(f"{s}://" for s in _SCHEMES) + ")"
        )  # fmt: skip
    where, _, query = rest.partition("?")
    opts: dict[str, str] = {}
    for pair in query.split("&") if query else []:
        key, eq, value = pair.partition("=")
        if not eq or key not in _SPEC_OPTIONS:
            raise InventoryError(
                f"--hosts {spec!r}: option {key!r} is not one preflight passes on (allowed: "
                + ", ".join(f"{o}=..." for o in _SPEC_OPTIONS) + ")"
            )  # fmt: skip
        opts[key] = value
    try:
        sudo = opts.get("sudo", "false").lower()
        if sudo not in ("true", "false", "1", "0", "yes", "no"):
            raise _Invalid(f"sudo={sudo!r} is not true or false")
        sudo_user = (
            _shaped("sudo_user", opts["sudo_user"], _USER, "a user name")
            if ("sudo_user" in opts)
            else ""
        )
        key = opts.get("ssh_identity_file", "")
        if key:
            _shaped("ssh_identity_file", key, _KEY_PATH, "a key file path")
        conn = _spec_connection(scheme, where, sudo in ("true", "1", "yes"), sudo_user, key)
    except _Invalid as exc:
        raise InventoryError(f"--hosts {spec!r}: {exc}") from None
    return Target(spec, conn.display, "", conn)


def _spec_connection(scheme: str, where: str, sudo: bool, sudo_user: str, key: str) -> Connection:
    if scheme == "local":
        if where:
            raise _Invalid("local:// takes no host")
        return Connection("local", sudo=sudo, sudo_user=sudo_user)
    if scheme in ("podman", "docker"):
        name = _shaped("container", where, _CONTAINER, "a container name")
        return Connection(scheme, name, sudo=sudo, sudo_user=sudo_user)
    user, at, hostport = where.rpartition("@")
    if at:
        user = _shaped("user", user, _USER, "a user name")
    host, port = hostport, None
    if hostport.startswith("["):
        host, _, tail = hostport[1:].partition("]")
        port = _port("port", tail[1:]) if tail.startswith(":") else None
    elif hostport.count(":") == 1:
        host, _, text = hostport.partition(":")
        port = _port("port", text)
    return Connection(scheme, _address("host", host), user, port, key, sudo, sudo_user)
