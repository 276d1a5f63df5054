"""An inventory's `ansible_ssh_common_args` / `ansible_ssh_extra_args`, validated (pure).

Ansible hands these strings to ssh as they are; preflight passes on only options that choose
how to reach a host (a jump host, known hosts, keys, keepalives, algorithms), each value held to
a strict shape, normalised to `-o Name=value` words of an argv (never a shell line). Anything
that runs a command on this side or changes what ssh reads (ProxyCommand, LocalCommand,
KnownHostsCommand, Include, Match, -F, -E, -S, ControlPath, BatchMode=no...) is refused, which
makes that host unusable with a finding naming the key, the value and what is allowed.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from collections.abc import Callable

_HOST = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?"
)
_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
_PATH = re.compile(r"~?/?[A-Za-z0-9_.@+-]+(?:/[A-Za-z0-9_.@+-]+)*")
_ALGOS = re.compile(r"[+^-]?[A-Za-z0-9@.+-]+(?:,[A-Za-z0-9@.+-]+)*")


class SshArgError(ValueError):
    """An ssh argument preflight does not pass on; the message names it and what is allowed."""


def _choice(*values: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value.lower() not in values:
            raise SshArgError(f"{value!r} is not one of {', '.join(values)}")
        return value.lower()

    return check


def _number(value: str) -> str:
    if not value.isascii() or not value.isdigit() or not 0 <= int(value) <= 86400:
        raise SshArgError(f"{value!r} is not a number of seconds or a count (0-86400)")
    return str(int(value))


def _path(value: str) -> str:
    if value.lower() == "none" or (_PATH.fullmatch(value) and ".." not in value.split("/")):
        return value
    raise SshArgError(f"{value!r} is not a file path (letters, digits, ._@+- and /; no ..)")


def _address(value: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        if _HOST.fullmatch(value):
            return value
    raise SshArgError(f"{value!r} is not a host name or an IP address")


def _jump_one(hop: str) -> str:
    user, at, rest = hop.rpartition("@")
    if at and not _USER.fullmatch(user):
        raise SshArgError(f"{user!r} is not a user name")
    port = ""
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        port = tail[1:] if tail.startswith(":") else ""
        if tail and not tail.startswith(":"):
            raise SshArgError(f"{hop!r} is not [user@]host[:port]")
        shown_host = f"[{_address(host)}]"
    else:
        host, colon, port = rest.partition(":")
        shown_host = _address(host)
        if colon and not port:
            raise SshArgError(f"{hop!r} is not [user@]host[:port]")
    if port and (not port.isascii() or not port.isdigit() or not 1 <= int(port) <= 65535):
        raise SshArgError(f"{port!r} is not a port number (1-65535)")
    return (f"{user}@" if at else "") + shown_host + (f":{port}" if port else "")


def _jump(value: str) -> str:
    if value.lower() == "none":
        return "none"
    return ",".join(_jump_one(hop) for hop in value.split(","))


_YESNO = _choice("yes", "no")
# option (lower case) -> (its name as ssh spells it, the check of its value)
OPTIONS: dict[str, tuple[str, Callable[[str], str]]] = {
    "proxyjump": ("ProxyJump", _jump),
    "stricthostkeychecking": ("StrictHostKeyChecking", _choice("yes", "no", "accept-new", "ask")),
    "userknownhostsfile": ("UserKnownHostsFile", _path),
    "globalknownhostsfile": ("GlobalKnownHostsFile", _path),
    "identityfile": ("IdentityFile", _path),
    "certificatefile": ("CertificateFile", _path),
    "identitiesonly": ("IdentitiesOnly", _YESNO),
    "hostkeyalias": ("HostKeyAlias", _address),
    "checkhostip": ("CheckHostIP", _YESNO),
    "serveraliveinterval": ("ServerAliveInterval", _number),
    "serveralivecountmax": ("ServerAliveCountMax", _number),
    "connecttimeout": ("ConnectTimeout", _number),
    "connectionattempts": ("ConnectionAttempts", _number),
    "compression": ("Compression", _YESNO),
    "addressfamily": ("AddressFamily", _choice("any", "inet", "inet6")),
    "forwardagent": ("ForwardAgent", _choice("no")),
    "forwardx11": ("ForwardX11", _choice("no")),
    "pubkeyauthentication": ("PubkeyAuthentication", _YESNO),
    "passwordauthentication": ("PasswordAuthentication", _YESNO),
    "gssapiauthentication": ("GSSAPIAuthentication", _YESNO),
    "loglevel": ("LogLevel", _choice("quiet", "fatal", "error", "info", "verbose")),
    "ciphers": ("Ciphers", lambda v: _shape(v, _ALGOS)),
    "macs": ("MACs", lambda v: _shape(v, _ALGOS)),
    "kexalgorithms": ("KexAlgorithms", lambda v: _shape(v, _ALGOS)),
    "hostkeyalgorithms": ("HostKeyAlgorithms", lambda v: _shape(v, _ALGOS)),
    "pubkeyacceptedalgorithms": ("PubkeyAcceptedAlgorithms", lambda v: _shape(v, _ALGOS)),
}
# flags -> the option they stand for
_FLAGS = {
    "-C": ("compression", "yes"),
    "-4": ("addressfamily", "inet"),
    "-6": ("addressfamily", "inet6"),
}


def _shape(value: str, pattern: re.Pattern[str]) -> str:
    if not pattern.fullmatch(value):
        raise SshArgError(f"{value!r} is not a comma-separated list of algorithm names")
    return value


def _option(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep:
        name, _, value = text.partition(" ")
    return name.strip(), value.strip()


def _words(key: str, text: str) -> list[tuple[str, str]]:
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise SshArgError(f"{key}={text!r} does not split into words ({exc})") from None
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w in ("-o", "-J") and i + 1 < len(words):
            arg, i = words[i + 1], i + 2
        elif (w.startswith("-o") or w.startswith("-J")) and len(w) > 2:
            arg, i = w[2:], i + 1
        elif w in _FLAGS:
            out.append(_FLAGS[w])
            i += 1
            continue
        else:
            raise SshArgError(f"{key}: {w!r} is not an ssh argument preflight passes on")
        pair = ("proxyjump", arg) if w.startswith("-J") else _lower(_option(arg))
        if pair[0] not in OPTIONS:
            allowed = ", ".join(n for n, _ in OPTIONS.values())
            raise SshArgError(
                f"{key}: ssh option {pair[0]!r} is not one preflight passes on (allowed: -J, -C, "
                f"-4, -6 and -o with {allowed})"
            )
        out.append(pair)
    return out


def _lower(pair: tuple[str, str]) -> tuple[str, str]:
    return pair[0].lower(), pair[1]


def validated(key: str, text: str) -> tuple[str, ...]:
    """`text` (the value of inventory variable `key`) as argv words: `-o Name=value` each."""
    out: list[str] = []
    for name, value in _words(key, text):
        spelled, check = OPTIONS[name]
        try:
            out += ["-o", f"{spelled}={check(value)}"]
        except SshArgError as exc:
            raise SshArgError(f"{key}: {spelled}: {exc}") from None
    return tuple(out)
