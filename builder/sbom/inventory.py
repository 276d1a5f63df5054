"""What an SBOM needs from inside an image, read by one short container run: /etc/os-release,
the OS packages (dpkg-query or rpm), the Python distributions of the venv, and the SASS/PTX of
every CUDA library (the fatbin reader, builder/fatbin.py, in a second run)."""

from __future__ import annotations

import json
from typing import Any

from builder.engines.base import Engine, RunSpec
from builder.errors import TrainimgError
from builder.labels import VENV, VERIFY_LABEL
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
    spec = RunSpec(
        image=image,
        entrypoint=[f"{VENV}/bin/python"],
        command=["-c", INVENTORY_PROBE],
        network="none",
        user="0",
        labels={VERIFY_LABEL: "sbom"},
    )
    result = engine.run(spec, timeout=600)
    line = next((ln for ln in reversed(result.stdout.splitlines()) if ln.startswith("{")), "")
    if result.exit_code != 0 or not line:
        raise TrainimgError(
            f"reading the packages of {image} failed (exit {result.exit_code}): "
            f"{result.stderr.strip()[-800:]}"
        )
    data: dict[str, Any] = json.loads(line)
    scan = scan_image(engine, image, IMAGE_ROOTS, python=f"{VENV}/bin/python")
    data["cuda_libraries"] = [
        {"path": lib["path"], "sass": list(lib["sass"]), "ptx": list(lib["ptx"])}
        for lib in scan["libraries"]
    ]
    return data
