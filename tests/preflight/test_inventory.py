"""Ansible inventories (INI, YAML, `ansible-inventory --list` JSON) -> testinfra host specs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.preflight.inventory import Connection, InventoryError, spec_for, targets

INI = """\
# GPU fleet
[hgx]
gpu[01:03] ansible_user=ops
b200-1 ansible_host=10.0.0.9 ansible_port=2222 ansible_become=true

[hgx:vars]
ansible_ssh_private_key_file=~/.ssh/fleet

[workstations]
ws1 ansible_connection=local

[lab:children]
hgx
workstations
"""

YAML = """\
all:
  vars:
    ansible_user: cloud
  children:
    hopper:
      hosts:
        h100-[a:b]:
        h200-1:
          ansible_host: 192.0.2.7
          ansible_user: root
    containers:
      hosts:
        fakehost-1:
          ansible_connection: containers.podman.podman
"""

LIST_JSON = {
    "_meta": {"hostvars": {"n1": {"ansible_host": "198.51.100.1", "ansible_become": True}}},
    "all": {"children": ["ungrouped", "gpu"]},
    "gpu": {"hosts": ["n1", "n2"]},
}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_ini(tmp_path: Path) -> None:
    got = targets(write(tmp_path, "hosts.ini", INI))
    specs = {t.name: t.spec for t in got}
    conns = {t.name: t.connection for t in got}
    assert specs["gpu01"] == "ssh://ops@gpu01"
    assert conns["gpu01"] == Connection("ssh", "gpu01", "ops", None, "~/.ssh/fleet")
    assert specs["gpu03"] is not None and specs["gpu03"].startswith("ssh://ops@gpu03")
    assert specs["b200-1"] == "ssh://10.0.0.9:2222"
    assert conns["b200-1"] == Connection("ssh", "10.0.0.9", "", 2222, "~/.ssh/fleet", True)
    assert specs["ws1"] == "local://"
    assert list(specs) == ["gpu01", "gpu02", "gpu03", "b200-1", "ws1"]


def test_limit_by_group_and_host(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts", INI)
    assert [t.name for t in targets(path, "workstations")] == ["ws1"]
    assert [t.name for t in targets(path, "lab")] == ["gpu01", "gpu02", "gpu03", "b200-1", "ws1"]
    assert [t.name for t in targets(path, "gpu02,ws1")] == ["gpu02", "ws1"]
    with pytest.raises(InventoryError, match="matches no group or host"):
        targets(path, "nope")


def test_yaml(tmp_path: Path) -> None:
    got = {t.name: t.spec for t in targets(write(tmp_path, "inv.yml", YAML))}
    assert got == {
        "h100-a": "ssh://cloud@h100-a",
        "h100-b": "ssh://cloud@h100-b",
        "h200-1": "ssh://root@192.0.2.7",
        "fakehost-1": "podman://fakehost-1",
    }


def test_ansible_inventory_list_json(tmp_path: Path) -> None:
    got = targets(write(tmp_path, "inv.json", json.dumps(LIST_JSON)))
    assert [(t.name, t.spec) for t in got] == [("n1", "ssh://198.51.100.1"), ("n2", "ssh://n2")]
    assert got[0].connection == Connection("ssh", "198.51.100.1", sudo=True)


def test_an_unusable_connection_is_a_target_with_an_error() -> None:
    t = spec_for("win1", {"ansible_connection": "winrm"})
    assert t.spec is None and "winrm" in t.error
    assert spec_for("v6", {"ansible_host": "2001:db8::1"}).spec == "ssh://[2001:db8::1]"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[hgx\nh1\n", r":1: not a section header"),
        ("[g:vars]\nnot-a-pair\n", r":2: expected key=value"),
        ("[g]\nh1 ansible_user\n", r":2: expected key=value after the host name"),
        ("all:\n  hosts: [a, b\n", r"not YAML"),
        ("all: 3\n", r"a group must be a mapping"),
        ('{"all": ', r"not JSON"),
        ("[g]\n", r"lists no hosts"),
    ],
)
def test_an_inventory_that_does_not_parse_says_where(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(InventoryError, match=match):
        targets(write(tmp_path, "bad", text))


def test_a_missing_inventory(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="cannot read the inventory"):
        targets(tmp_path / "absent.ini")


@pytest.mark.parametrize(
    ("hostvars", "key"),
    [
        ({"ansible_port": "1?ssh_config=/tmp/evil"}, "ansible_port"),  # an ssh option
        ({"ansible_port": "22 -oProxyCommand=x"}, "ansible_port"),
        ({"ansible_port": "0"}, "ansible_port"),
        ({"ansible_port": "70000"}, "ansible_port"),
        ({"ansible_host": "h?ssh_config=/tmp/evil"}, "ansible_host"),
        ({"ansible_host": "-oProxyCommand=touch /tmp/x"}, "ansible_host"),
        ({"ansible_host": "h#frag"}, "ansible_host"),
        ({"ansible_user": "root@evil"}, "ansible_user"),
        ({"ansible_user": "-oProxyCommand=x"}, "ansible_user"),
        ({"ansible_user": "a:pw"}, "ansible_user"),
        (
            {"ansible_ssh_private_key_file": "k?ssh_config=/tmp/evil"},
            "ansible_ssh_private_key_file",
        ),
        ({"ansible_ssh_private_key_file": "/keys/../etc/shadow"}, "ansible_ssh_private_key_file"),
        ({"ansible_become": "true", "ansible_become_user": "x;id"}, "ansible_become_user"),
        ({"ansible_connection": "podman", "ansible_host": "c --privileged"}, "ansible_host"),
    ],
)
def test_inventory_values_of_the_wrong_shape_never_become_a_connection(
    hostvars: dict[str, str], key: str
) -> None:
    t = spec_for("gpu1", hostvars)
    assert t.spec is None and t.connection is None
    assert key in t.error and repr(str(hostvars[key])) in t.error


def test_the_ssh_config_injection_cannot_reach_ssh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ansible_port="1?ssh_config=FILE"` once made ssh read FILE, whose
    ProxyCommand ran locally. Through the whole CLI path (inventory -> fleet -> testinfra ->
    ssh), no ssh process may see FILE and the marker the ProxyCommand would write never
    appears; a valid port still gets through as an argument of `-p`."""
    from builder.cli import main
    from builder.preflight.ssh_transport import DeadlineSsh

    marker = tmp_path / "pwned"
    evil = tmp_path / "evil_config"
    evil.write_text(f"Host *\n  ProxyCommand touch {marker}\n")
    seen: list[list[str]] = []
    real = DeadlineSsh.ssh_argv

    def recording(self: DeadlineSsh, command: str) -> list[str]:
        argv = real(self, command)
        seen.append(argv)  # the exact argv ssh is started with (no shell on this side)
        return argv

    monkeypatch.setattr(DeadlineSsh, "ssh_argv", recording)
    inv = tmp_path / "hosts.ini"
    inv.write_text(
        f'[gpu]\nbad ansible_host=127.0.0.1 ansible_port="1?ssh_config={evil}"\n'
        "good ansible_host=127.0.0.1 ansible_port=1 ansible_user=nobody\n"
    )
    code = main(["preflight", "--inventory", str(inv), "--no-images", "--json", "--timeout", "5"])
    assert code == 4  # the unusable and the unreachable host: broken now
    assert not marker.exists()
    assert seen and all(str(evil) not in " ".join(argv) for argv in seen), seen
    good = [argv for argv in seen if "-p" in argv]  # the good host ran, its port an argument
    assert good and all(a[a.index("-p") + 1] == "1" and "127.0.0.1" in a for a in good), seen
