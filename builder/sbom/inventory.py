"""What an SBOM needs from inside an image, read by one short container run: /etc/os-release,
the OS packages (dpkg-query or rpm, each with its source package: Debian's advisories are keyed
by it), the Python distributions of the venv (with their author or maintainer), and the
SASS/PTX of every CUDA library (the fatbin reader, builder/arches/fatbin.py, in a second run).
Each distribution's Requires-Dist and the interpreter's marker environment are kept, so the
SBOM's dependency edges are the image's own (builder/sbom/edges.py).
Each distribution lists the shared objects its RECORD installed: a CUDA library's SBOM
component takes the version and supplier of the wheel that installed it.

Licences, as each package states them: an rpm's License tag; a deb's machine-readable
(DEP-5) /usr/share/doc/<package>/copyright, the License of its `Files: *` paragraph (dpkg keeps
no licence field; a free-form copyright file gives none); a wheel's License-Expression, else its
one-line License, else its `License ::` classifiers. Inventories recorded before this capture
have no licence keys: their components carry no licence (builder/sbom/licenses.py).
"""

from __future__ import annotations

from typing import Any

from builder.arches.scan import IMAGE_ROOTS, scan_image
from builder.engines.image_probe import run_probe
from builder.engines.roles import ContainerRunner
from builder.spec.layout import VENV_PYTHON

INVENTORY_PROBE = r"""
import json, os, platform, shutil, subprocess, sys
import importlib.metadata as md
out = {"os_release": {}, "packages": [], "package_type": None, "python": []}
# the PEP 508 marker environment of this interpreter: the SBOM evaluates each distribution's
# Requires-Dist markers against the image's Python, not the builder's
impl = sys.implementation
out["markers"] = {
    "implementation_name": impl.name,
    "implementation_version": "{0.major}.{0.minor}.{0.micro}".format(impl.version),
    "os_name": os.name,
    "platform_machine": platform.machine(),
    "platform_python_implementation": platform.python_implementation(),
    "platform_release": platform.release(),
    "platform_system": platform.system(),
    "platform_version": platform.version(),
    "python_full_version": platform.python_version(),
    "python_version": ".".join(platform.python_version_tuple()[:2]),
    "sys_platform": sys.platform,
}


def dep5_license(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(200000)
    except OSError:
        return ""
    if not text.startswith("Format:"):
        return ""
    for para in text.split("\n\n"):
        fields = {}
        for line in para.splitlines():
            key, sep, value = line.partition(":")
            if sep and not line[:1].isspace():
                fields[key.strip().lower()] = value.strip()
        if fields.get("files") == "*" and fields.get("license"):
            return fields["license"][:200]
    return ""


with open("/etc/os-release") as fh:
    for line in fh:
        key, sep, value = line.strip().partition("=")
        if sep:
            out["os_release"][key] = value.strip('"')
if shutil.which("dpkg-query"):
    out["package_type"] = "deb"
    fmt = "${Package}\t${Version}\t${Architecture}\t${source:Package}\t${source:Version}\n"
    text = subprocess.run(["dpkg-query", "-W", "-f", fmt],
                          capture_output=True, text=True, check=True).stdout
    for line in text.splitlines():
        name, version, arch, source, source_version = line.split("\t")
        pkg = {"name": name, "version": version, "arch": arch, "source": source,
               "source_version": source_version}
        lic = dep5_license("/usr/share/doc/" + name + "/copyright")
        if lic:
            pkg["license"] = lic
        out["packages"].append(pkg)
elif shutil.which("rpm"):
    out["package_type"] = "rpm"
    fmt = "%{NAME}\t%{EPOCH}\t%{VERSION}-%{RELEASE}\t%{ARCH}\t%{SOURCERPM}\t%{LICENSE}\n"
    text = subprocess.run(["rpm", "-qa", "--qf", fmt], capture_output=True, text=True,
                          check=True).stdout
    for line in text.splitlines():
        name, epoch, version, arch, source, lic = line.split("\t")
        pkg = {"name": name, "version": version, "arch": arch}
        if lic not in ("(none)", ""):
            pkg["license"] = lic
        if source not in ("(none)", ""):
            pkg["source"] = source
        if epoch not in ("(none)", ""):
            pkg["epoch"] = epoch
        out["packages"].append(pkg)
for d in md.distributions():
    who = (d.metadata["Maintainer"] or d.metadata["Author"] or d.metadata["Maintainer-email"]
           or d.metadata["Author-email"] or "")
    lic = str(d.metadata["License-Expression"] or d.metadata["License"] or "").strip()
    out["python"].append({"name": d.metadata["Name"], "version": d.version,
                          "installer": (d.read_text("INSTALLER") or "").strip(),
                          "requires": list(d.requires or ()),
                          "author": " ".join(str(who).split())[:200],
                          "license": lic[:200] if "\n" not in lic else "",
                          "license_classifiers": sorted(
                              c for c in d.metadata.get_all("Classifier") or ()
                              if c.startswith("License ::")),
                          "libraries": sorted(
                              os.path.normpath(str(d.locate_file(f))) for f in d.files or ()
                              if ".so" in f.name)})
print(json.dumps(out, sort_keys=True))
"""


def read_inventory(engine: ContainerRunner, image: str) -> dict[str, Any]:
    data = run_probe(engine, image, INVENTORY_PROBE, what="packages", user="0")
    scan = scan_image(engine, image, IMAGE_ROOTS, python=VENV_PYTHON)
    data["cuda_libraries"] = [
        {"path": lib["path"], "sass": list(lib["sass"]), "ptx": list(lib["ptx"])}
        for lib in scan["libraries"]
    ]
    return data
