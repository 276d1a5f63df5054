"""What ansible-core makes of inventories, printed as JSON: run as a process by
tests/preflight/test_inventory_ansible.py, never imported there — importing ansible patches
`sys.intern` for the whole interpreter, which breaks torch.compile in every later test.

argv[1]: a JSON list of [inventory path, --limit or null]; prints {path: {host: [address, user,
port or null, [ssh args]]}} with ansible-core's InventoryManager + VariableManager + its ssh
connection plugin's options (the args validated as preflight validates them)."""

from __future__ import annotations

import json
import sys
from typing import Any

from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.plugins.loader import connection_loader
from ansible.vars.manager import VariableManager

from builder.preflight import ssh_args


def view(path: str, limit: str | None) -> dict[str, Any]:
    loader = DataLoader()
    inv = InventoryManager(loader=loader, sources=[path])
    variables = VariableManager(loader=loader, inventory=inv)
    if limit:
        inv.subset(limit)
    out: dict[str, Any] = {}
    for host in inv.get_hosts("all"):
        conn: Any = connection_loader.get("ssh", PlayContext(), None)
        conn.set_options(var_options=variables.get_vars(host=host, include_hostvars=False))
        args: tuple[str, ...] = ()
        for name in ("ssh_common_args", "ssh_extra_args"):
            args += ssh_args.validated(name, conn.get_option(name) or "")
        port = conn.get_option("port")
        user = conn.get_option("remote_user") or ""
        out[host.name] = [str(conn.get_option("host")), user, int(port) if port else None, args]
    return out


if __name__ == "__main__":
    cases = json.loads(sys.argv[1])
    json.dump({path: view(path, limit) for path, limit in cases}, sys.stdout)
