"""preflight's inventory reading against ansible-core's own: for every inventory below (INI and
YAML) and --limit, ansible-core's InventoryManager + VariableManager + its ssh connection
plugin's options (host, remote_user, port, ssh_common_args, ssh_extra_args) give the same hosts,
addresses, users, ports and ssh arguments as builder/preflight/inventory.py. Then the cases
where preflight refuses on purpose what ansible takes (port 0, ranges past the bound, ssh
options that run commands here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from builder.cli import main
from builder.preflight import ssh_args
from builder.preflight.inventory import InventoryError, targets
from tests.preflight.conftest import REPO

View = dict[str, tuple[str, str, int | None, tuple[str, ...]]]
Views = dict[int, View]  # case index -> ansible-core's view of its inventory

JUMP = "ansible_ssh_common_args='-o ProxyJump=ops@bastion.example:2200'"
INI: list[tuple[str, str | None]] = [
    ("gpu1\ngpu2 ansible_host=10.0.0.2\n", None),
    (
        "[gpu]\nn1 ansible_ssh_host=10.0.0.1\nn2 ansible_host=10.0.0.2 ansible_ssh_host=10.0.0.3\n",
        None,
    ),
    (
        "[gpu]\nn1 ansible_user=a\nn2 ansible_ssh_user=b\nn3 ansible_user=a ansible_ssh_user=b\n",
        None,
    ),
    ("[gpu]\nn1 ansible_ssh_user=root\nn2\n[gpu:vars]\nansible_user=grp\n", None),
    ("[gpu]\nn1 ansible_user=hostu\n[hgx]\nn1\n[hgx:vars]\nansible_ssh_user=hgxu\n", None),
    ("[gpu]\nn1:2222\nn2 ansible_port=23\nn3:2222 ansible_port=24\n", None),
    ("[gpu]\nn1 ansible_ssh_port=2200\n[gpu:vars]\nansible_port=22\n", None),
    ("[gpu]\nnode[01:04]\n", None),
    ("[gpu]\nnode[0:20:5] ansible_user=ops\n", None),
    ("[rack]\nr-[a:d]-[1:2]\n", None),
    ("[gpu]\nnode[1:3]:2022\n", None),
    (f"[gpu]\nn1\nn2\n[gpu:vars]\n{JUMP}\n", None),
    ("[gpu]\nn1 ansible_ssh_extra_args='-o ServerAliveInterval=7'\n", None),
    (f"[gpu]\nn1 ansible_ssh_extra_args='-C -4'\n[gpu:vars]\n{JUMP}\n", None),
    ("[gpu]\nn1 ansible_ssh_common_args='-J jump1,ops@jump2:2222'\n", None),
    ("[a]\nh1\nh2\n[b]\nh2\nh3\n[all:vars]\nansible_user=everyone\n", None),
    (
        "[parent:children]\nchild\n[child]\nc1\n[parent:vars]\nansible_user=p\n[child:vars]\nansible_user=c\n",
        None,
    ),
    ("[zeta]\nh1\n[alpha]\nh1\n[zeta:vars]\nansible_user=z\n[alpha:vars]\nansible_user=a\n", None),
    (
        "[zeta]\nh1\n[alpha]\nh1\n[zeta:vars]\nansible_user=z\n[alpha:vars]\nansible_user=a\nansible_group_priority=5\n",
        None,
    ),
    ("[hgx]\ngpu1\ngpu2\ngpu3\n[l40s]\nws1\n", "hgx:!gpu3"),
    ("[hgx]\nnode1\nnode2\n[other]\nlogin1\n", "node*"),
    ("[hgx]\ngpu1\ngpu2\n[rhel9]\ngpu2\ngpu3\n", "hgx:&rhel9"),
    ("[hgx]\ngpu1\ngpu2\n[rhel9]\ngpu2\ngpu3\n", "hgx,rhel9,!gpu1"),
    ("[hgx]\ngpu1\ngpu2\n[rhel9]\ngpu2\ngpu3\n", "!gpu2"),
    ("[hgx]\ngpu1\ngpu2\n[b200]\nb1\nb2\n", "~(gpu|b)1"),
    ("[hgx]\ngpu1\ngpu2\n[b200]\nb1\n", "gpu?"),
    ("[a:children]\nb\n[b]\nh1\nh2\n[c]\nh3\n", "a:c"),
    ("[gpu]\n2001:db8::7 ansible_user=v6\n[10.1.2.3]\n", None),
    ("[gpu]\n[2001:db8::8]:2200\n", None),
]


def _yaml(doc: dict[str, Any]) -> str:
    return yaml.safe_dump({"all": doc}, sort_keys=False)


def _group(hosts: dict[str, Any], **group_vars: Any) -> dict[str, Any]:
    return {"hosts": hosts, **({"vars": group_vars} if group_vars else {})}


YAML: list[tuple[str, str | None]] = [
    (_yaml({"hosts": {"n1": {"ansible_ssh_host": "10.0.0.9"}}}), None),
    (_yaml({"children": {"gpu": _group({"n[1:3]": None}, ansible_user="ops")}}), None),
    (
        _yaml({"vars": {"ansible_user": "a"},
               "children": {"gpu": _group({"n1": {"ansible_ssh_user": "b"}})}}),
        None,
    ),
    (
        _yaml({"children": {"gpu": _group({"n1": {"ansible_port": 2201,
                                                  "ansible_ssh_port": 2202}})}}),
        None,
    ),
    (
        _yaml({"children": {"gpu": _group(
            {"n1": None, "n2": {"ansible_ssh_extra_args": "-o StrictHostKeyChecking=accept-new"}},
            ansible_ssh_common_args="-o ProxyJump=bastion",
        )}}),
        None,
    ),
    (
        _yaml({"children": {"p": {"vars": {"ansible_user": "p"},
                                  "children": {"c": _group({"h1": None}, ansible_user="c")}}}}),
        None,
    ),
    (
        _yaml({"children": {"hgx": _group({"gpu1": None, "gpu2": None}),
                            "b200": _group({"gpu2": None, "b1": None})}}),
        "hgx:&b200",
    ),
    (_yaml({"children": {"hgx": _group({"node[01:10]": None})}}), "node0*:!node05"),
    (_yaml({"hosts": {"gpu1:2222": None, "gpu2": {"ansible_host": "192.0.2.5"}}}), None),
    (
        _yaml({"children": {"a": _group({"h1": None}, ansible_user="a"),
                            "b": _group({"h1": None}, ansible_user="b",
                                        ansible_group_priority=0)}}),
        None,
    ),
]  # fmt: skip
CASES = [("ini", text, limit) for text, limit in INI] + [("yml", t, lim) for t, lim in YAML]


@pytest.fixture(scope="module")
def ansible(tmp_path_factory: pytest.TempPathFactory) -> Views:
    """Every case's inventory as ansible-core reads it, in one process (ansible_view.py)."""
    pytest.importorskip("ansible", reason="ansible-core is a dev dependency (pyproject)")
    home = tmp_path_factory.mktemp("ansible-home")
    cases: list[tuple[str, str | None]] = []
    for i, (fmt, text, limit) in enumerate(CASES):
        path = home / f"case{i}" / f"hosts.{fmt}"
        path.parent.mkdir()
        path.write_text(text)
        cases.append((str(path), limit))
    # only the ini and yaml parsers (never a script or a cloud plugin), nothing under ~
    env = {
        **os.environ, "ANSIBLE_INVENTORY_ENABLED": "ini,yaml", "ANSIBLE_HOME": str(home),
        "ANSIBLE_LOCAL_TEMP": str(home / "tmp"), "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True",
    }  # fmt: skip
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("ansible_view.py")), json.dumps(cases)],
        cwd=REPO, env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, Any] = json.loads(proc.stdout)
    return {
        i: {h: (a, u, p, tuple(args)) for h, (a, u, p, args) in out[path].items()}
        for i, (path, _) in enumerate(cases)
    }


def ours(path: Path, limit: str | None) -> View:
    out = {}
    for t in targets(path, limit):
        c = t.connection
        assert c is not None, t.error
        out[t.name] = (c.host, c.user, c.port, c.ssh_args)
    return out


@pytest.mark.parametrize(("case", "fmt", "text", "limit"), [(i, *c) for i, c in enumerate(CASES)])
def test_same_hosts_addresses_users_ports_and_ssh_args_as_ansible(
    ansible: Views, tmp_path: Path, case: int, fmt: str, text: str, limit: str | None
) -> None:
    path = tmp_path / f"hosts.{fmt}"
    path.write_text(text)
    theirs = ansible[case]
    assert theirs, "ansible-core found no host: the case is wrong"
    assert ours(path, limit) == theirs


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 30
    assert len({text for _, text, _ in CASES}) >= 30  # distinct inventories, INI and YAML


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[gpu]\nn1 ansible_port=0\n", "ansible_port='0' is not a port number (1-65535)"),
        ("[gpu]\nn1 ansible_ssh_port=70000\n", "ansible_ssh_port='70000'"),
        ("[gpu]\nn1 ansible_ssh_common_args='-o ProxyCommand=touch /tmp/x'\n", "'proxycommand'"),
        ("[gpu]\nn1 ansible_ssh_extra_args='-F /tmp/evil'\n", "'-F' is not an ssh argument"),
        ("[gpu]\nn1 ansible_ssh_common_args='-o ProxyJump=$(reboot)'\n", "is not a host name"),
        ("[gpu]\nn1 ansible_ssh_extra_args='-o LocalCommand=id'\n", "'localcommand'"),
    ],
)
def test_what_ansible_takes_and_preflight_refuses_is_that_hosts_error(
    tmp_path: Path, text: str, needle: str
) -> None:
    path = tmp_path / "hosts.ini"
    path.write_text(text)
    [t] = targets(path)
    assert t.connection is None and needle in t.error, t.error


@pytest.mark.parametrize(
    ("pattern", "needle"),
    [
        ("node[0:99999999]", "expands to 100,000,000 hosts; one pattern may expand to at most"),
        ("n[a:z][a:z][a:z][a:z][a:z]", "expands to 11,881,376 hosts"),
        ("node[5:1x]", "is not a range of numbers or of letters"),
        ("node[01:100]", "zero-padded range needs begin and end of one width"),
    ],
)
def test_a_range_past_the_bound_is_exit_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pattern: str, needle: str
) -> None:
    path = tmp_path / "hosts.ini"
    path.write_text(f"[gpu]\n{pattern}\n")
    with pytest.raises(InventoryError, match=r"hosts\.ini:2"):
        targets(path)
    assert main(["preflight", "--inventory", str(path), "--no-images"]) == 2
    err = capsys.readouterr().err
    assert needle in err and pattern in err and "Traceback" not in err


def test_a_limit_that_matches_nothing_or_a_subscript_is_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "hosts.ini"
    path.write_text("[hgx]\ngpu1\ngpu2\n")
    with pytest.raises(InventoryError, match="'gpu9' matches no group or host"):
        targets(path, "hgx:!gpu9")
    with pytest.raises(InventoryError, match="subscripts"):
        targets(path, "hgx[0]")


def test_ssh_args_are_normalised_and_reach_ssh_before_the_host(tmp_path: Path) -> None:
    """What ansible hands ssh as a string reaches ssh as argv words, after preflight's own
    options (ssh takes the first value it meets: BatchMode=yes cannot be undone) and before
    `--` and the host."""
    from builder.preflight.hostio import connect_validated
    from builder.preflight.ssh_transport import DeadlineSsh

    path = tmp_path / "hosts.ini"
    path.write_text(
        "[gpu]\nn1 ansible_host=192.0.2.1 ansible_ssh_common_args='-J ops@jump:2200 -C'"
        " ansible_ssh_extra_args='-o \"ServerAliveInterval 9\" -o BatchMode=no'\n"
        "n2 ansible_host=192.0.2.2 ansible_ssh_extra_args='-o serveraliveinterval=9'\n"
    )
    bad, good = targets(path)
    assert bad.connection is None and "'batchmode' is not one preflight passes on" in bad.error
    assert good.connection is not None
    assert good.connection.ssh_args == ("-o", "ServerAliveInterval=9")
    assert ssh_args.validated("x", "-J ops@jump:2200,[2001:db8::1]:22 -C -6") == (
        "-o", "ProxyJump=ops@jump:2200,[2001:db8::1]:22",
        "-o", "Compression=yes", "-o", "AddressFamily=inet6",
    )  # fmt: skip
    host = connect_validated(good.connection, 5, str(tmp_path))
    backend = host.host.backend
    assert isinstance(backend, DeadlineSsh)
    argv = backend.ssh_argv("uname -r")
    assert argv.index("BatchMode=yes") < argv.index("ServerAliveInterval=9") < argv.index("--")
    assert argv[argv.index("--") + 1] == "192.0.2.2"
    assert argv[-1].startswith("exec env -i PATH=") and "/bin/sh -c 'uname -r'" in argv[-1]
