"""What an SBOM needs from inside an image, read by one short container run: /etc/os-release,
the OS packages (dpkg-query or rpm), the Python distributions of the venv, and the SASS/PTX of
every CUDA library (the fatbin reader, builder/fatbin.py, in a second run)."""

from __future__ import annotations

from typing import Any

from builder.engines.base import Engine
from builder.image_probe import run_probe
from builder.labels import VENV
from builder.verify.scan import IMAGE_ROOTS, scan_image

INVENTORY_PROBE = r"""
import json, shutil, subprocess
import importlib.metadata as md
out = {"os_release": {}, "packages": [], "package_type": None, "python": []}
with open("/etc/os-release") as fh:
    for line in fh:
        key, sep, value = line.strip().partition("=")
        if sep:
            out["os_release"][key] = value.strip('"')
if shutil.which("dpkg-query"):
    out["package_type"] = "deb"
    text = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${Architecture}\n"],
                          capture_output=True, text=True, check=True).stdout
    for line in text.splitlines():
        name, version, arch = line.split("\t")
        out["packages"].append({"name": name, "version": version, "arch": arch})
elif shutil.which("rpm"):
    out["package_type"] = "rpm"
    fmt = "%{NAME}\t%{EPOCH}\t%{VERSION}-%{RELEASE}\t%{ARCH}\n"
    text = subprocess.run(["rpm", "-qa", "--qf", fmt], capture_output=True, text=True,
                          check=True).stdout
    for line in text.splitlines():
        name, epoch, version, arch = line.split("\t")
        pkg = {"name": name, "version": version, "arch": arch}
        if epoch not in ("(none)", ""):
            pkg["epoch"] = epoch
        out["packages"].append(pkg)
for d in md.distributions():
    out["python"].append({"name": d.metadata["Name"], "version": d.version,
                          "installer": (d.read_text("INSTALLER") or "").strip()})
print(json.dumps(out, sort_keys=True))
"""


def read_inventory(engine: Engine, image: str) -> dict[str, Any]:
    data = run_probe(engine, image, INVENTORY_PROBE, what="packages", user="0")
    scan = scan_image(engine, image, IMAGE_ROOTS, python=f"{VENV}/bin/python")
    data["cuda_libraries"] = [
        {"path": lib["path"], "sass": list(lib["sass"]), "ptx": list(lib["ptx"])}
        for lib in scan["libraries"]
    ]
    return data
