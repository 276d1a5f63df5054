"""Each parser on the recorded outputs and on the other formats the tools print."""

from __future__ import annotations

import json

import pytest

from builder.facts.driver_version import DriverVersion
from builder.host import parsers as p
from tests.preflight.fakehost import FIXTURES, Fixture


def rec(host: str, key: str) -> str:
    fx = Fixture.load_fixture(host)
    meta = fx.meta["probes"][key]
    return (FIXTURES / host / meta["file"]).read_text() if "file" in meta else str(meta["stdout"])


def hostfile(host: str, path: str) -> str:
    return (FIXTURES / host / "files" / path.lstrip("/")).read_text()


@pytest.mark.parametrize(
    ("host", "os_id", "version", "pretty"),
    [
        ("el9-h100", "rocky", "9.5", "Rocky Linux 9.5 (Blue Onyx)"),
        ("el9-b200-proprietary", "rhel", "9.4", "Red Hat Enterprise Linux 9.4 (Plow)"),
        ("el9-h200-fm-mismatch", "almalinux", "9.4", "AlmaLinux 9.4 (Seafoam Ocelot)"),
        ("el9-b200-stale-cdi", "centos", "9", "CentOS Stream 9"),
    ],
)
def test_os_release(host: str, os_id: str, version: str, pretty: str) -> None:
    osr = p.os_release(hostfile(host, "/etc/os-release"))
    assert osr is not None
    assert (osr.id, osr.version_id, osr.pretty_name) == (os_id, version, pretty)
    assert p.os_release("garbage\n") is None


def test_nvidia_version_open_and_proprietary() -> None:
    open_ = p.nvidia_version(hostfile("el9-h200-fm-mismatch", "/proc/driver/nvidia/version"))
    prop = p.nvidia_version(hostfile("el9-h100", "/proc/driver/nvidia/version"))
    assert open_ is not None and (str(open_.version), open_.flavour) == ("570.124.06", "open")
    assert prop is not None and (str(prop.version), prop.flavour) == ("550.144.03", "proprietary")
    # the exact lines from public reports (nixGL#186; NVIDIA's kernel_open README), and arm
    line = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build  "
            "(dvs-builder@U16-A24-9-2)  Thu Oct 10 12:15:00 UTC 2024")  # fmt: skip
    assert p.nvidia_version(line) == p.KernelModule(DriverVersion("565.57.01"), "open", line)
    arm = p.nvidia_version("NVRM version: NVIDIA UNIX aarch64 Kernel Module  535.161.07  Sat Feb")
    assert arm is not None and arm.flavour == "proprietary" and str(arm.version) == "535.161.07"
    # a version that is not one is no module line (the one driver-version parser decides)
    assert p.nvidia_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  5x0.1  Sat") is None
    assert p.nvidia_version("") is None
    assert p.module_license("Dual MIT/GPL\n") == "open"
    assert p.module_license("NVIDIA\n") == "proprietary"
    assert p.module_license("GPL\n") is None


def test_smi_csv() -> None:
    gpus = p.smi_gpus(rec("el9-h100", "smi"))
    assert len(gpus) == 8
    assert gpus[0].name == "NVIDIA H100 80GB HBM3" and gpus[0].compute_cap == (9, 0)
    assert gpus[7].bus_id == "00000000:DB:00.0" and str(gpus[7].driver) == "550.144.03"
    odd = p.smi_gpus("0, GPU-1, NVIDIA A, B, 12.0, 570.1, 00000000:01:00.0, Enabled\n")
    assert odd[0].name == "NVIDIA A, B" and odd[0].compute_cap == (12, 0)
    assert p.smi_gpus("No devices were found\n") == []
    assert p.smi_gpus("0, GPU-1, X, [N/A], 470.1, 0:1:0.0, Disabled\n")[0].compute_cap is None


def test_smi_q() -> None:
    q = p.smi_q(rec("el9-h100", "smi-q"))
    assert q is not None
    assert (q.driver, q.cuda, len(q.gpus)) == ("550.144.03", "12.4", 8)
    g = q.gpus[0]
    assert (g.bus_id, g.brand, g.architecture, g.fabric_state) == (
        "00000000:18:00.0", "NVIDIA", "Hopper", "Completed")  # fmt: skip
    geforce = p.smi_q(rec("el9-geforce", "smi-q"))
    assert geforce is not None and geforce.gpus[0].brand == "GeForce"
    assert geforce.gpus[0].fabric_state == "N/A"
    assert p.smi_q("nothing here") is None


NOTE = "[Deprecated; will be removed in CUDA 14.0. Use CUDA UMD Version instead]"


@pytest.mark.parametrize(
    ("host", "driver", "cuda"),
    [("el9-l40s-r610-cuda13.3", "610.57.04", "13.3"),
     ("el9-l40s-r615-cuda13.4", "615.38.02", "13.4"),
     ("el9-l40s-r620-cuda13.5", "620.70.06", "13.5"),
     ("el9-l40s-r595-cuda13.2", "595.71.05", "13.2")],
)  # fmt: skip
def test_smi_q_reads_the_r610_keys_and_drops_the_deprecation_note(
    host: str, driver: str, cuda: str
) -> None:
    q = p.smi_q(rec(host, "smi-q"))
    assert q is not None and (q.driver, q.cuda) == (driver, cuda)
    assert all(g.product_name == "NVIDIA L40S" for g in q.gpus) and len(q.gpus) == 2
    assert ("CUDA Version" in q.deprecated_keys) == (driver[:3] != "595")


def test_smi_q_prefers_the_new_keys_and_reads_the_old_alone() -> None:
    # the deprecated key alone (a driver that prints only it), with its note
    q = p.smi_q(f"Driver Version : 610.57.04\nCUDA Version : 13.3 {NOTE}\n")
    assert q is not None and (q.driver, q.cuda) == ("610.57.04", "13.3")
    assert q.deprecated_keys == ("CUDA Version",)
    # the new key wins where both are printed and disagree
    q = p.smi_q("KMD Version : 620.70.06\nDriver Version : 620.1 [deprecated]\n"
                "CUDA Version : 13.4\nCUDA UMD Version : 13.5\n")  # fmt: skip
    assert q is not None and (q.driver, q.cuda) == ("620.70.06", "13.5")
    # a note that is not a deprecation is part of the value
    assert p.smi_q("Driver Version : 580.65.06\nCUDA Version : 13.0 [beta]\n").cuda == "13.0 [beta]"  # type: ignore[union-attr]


def test_smi_csv_drops_a_deprecation_note_from_the_driver() -> None:
    line = ("0, GPU-1, NVIDIA L40S, 8.9, 620.70.06 [Deprecated; use kmd_version], "
            "00000000:41:00.0, Enabled\n")  # fmt: skip
    (gpu,) = p.smi_gpus(line)
    assert str(gpu.driver) == "620.70.06" and gpu.name == "NVIDIA L40S"


@pytest.mark.parametrize(
    ("line", "want"),
    [
        # R610+ (as quoted in sgl-project/sglang#27487)
        ("| NVIDIA-SMI 610.43.02              KMD Version: 610.43.02     CUDA UMD Version: 13.3 |",
         ("610.43.02", "610.43.02", "13.3")),
        # to R595 (as quoted in rossumai/nvgpu#15)
        ("| NVIDIA-SMI 450.57       Driver Version: 450.57       CUDA Version: 11.0     |",
         ("450.57", "450.57", "11.0")),
        # no CUDA at all (a driver without libcuda)
        ("| NVIDIA-SMI 331.62     Driver Version: 331.62         |", ("331.62", "331.62", "")),
    ],
)  # fmt: skip
def test_smi_banner_both_spellings(line: str, want: tuple[str, str, str]) -> None:
    banner = p.smi_banner(f"Sun Jun  7 08:16:57 2026\n+----+\n{line}\n+----+\n")
    assert banner is not None and (banner.smi, banner.driver, banner.cuda) == want
    assert p.smi_banner("No devices were found\n") is None


def test_smi_apps() -> None:
    apps = p.smi_apps(rec("el9-geforce", "smi-apps"))
    assert [(a.pid, a.name, a.memory) for a in apps] == [
        (48213, "/home/ana/venv/bin/python", "17820 MiB")
    ]
    assert p.smi_apps("No running processes found\n") == []


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("nvidia/570.124.06, 5.14.0-503.el9.x86_64, x86_64: installed",
         ("nvidia", "570.124.06", "5.14.0-503.el9.x86_64", "installed", None, ())),
        ("nvidia-open/570.86.15, 5.14.0-1.el9.x86_64, x86_64: installed (Original modules exist)",
         ("nvidia-open", "570.86.15", "5.14.0-1.el9.x86_64", "installed", None,
          ("Original modules exist",))),
        ("nvidia/570.124.06: added", ("nvidia", "570.124.06", None, "added", None, ())),
        ("nvidia/560.35.03: broken", ("nvidia", "560.35.03", None, "broken", None, ())),
        ("nvidia, 535.161.07, 4.18.0-513.el8.x86_64, x86_64: installed",  # dkms < 2.8.6
         ("nvidia", "535.161.07", "4.18.0-513.el8.x86_64", "installed", None, ())),
        ("vboxguest, 4.3.20, 3.10.0-123.20.1.el7.x86_64, x86_64: installed-weak from "
         "3.10.0-123.el7.x86_64",
         ("vboxguest", "4.3.20", "3.10.0-123.20.1.el7.x86_64", "installed-weak",
          "3.10.0-123.el7.x86_64", ())),
        ("nvidia/570.124.06, 5.14.0-1.el9.x86_64, x86_64: installed (Differences between built "
         "and installed modules) (Built modules are missing in the kernel modules folder)",
         ("nvidia", "570.124.06", "5.14.0-1.el9.x86_64", "installed", None,
          ("Differences between built and installed modules",
           "Built modules are missing in the kernel modules folder"))),
    ],
)  # fmt: skip
def test_dkms_status_formats(line: str, expected: tuple[object, ...]) -> None:
    status = p.dkms_status(line + "\n")
    assert status.unparsed == ()
    e = status.entries[0]
    assert (e.module, e.version, e.kernel, e.state, e.weak_from, e.warnings) == expected


def test_dkms_status_keeps_what_it_cannot_read() -> None:
    status = p.dkms_status("Error! Could not locate dkms.conf file.\n\n")
    assert status.entries == () and status.unparsed == ("Error! Could not locate dkms.conf file.",)


def test_mokutil() -> None:
    assert p.sb_state("SecureBoot enabled\n") == "enabled"
    assert p.sb_state("SecureBoot disabled\nPlatform is in Setup Mode\n") == "disabled"
    assert p.sb_state("EFI variables are not supported on this system\n") == "unsupported"
    assert p.sb_state("This system doesn't support Secure Boot\n") == "unsupported"
    assert p.sb_state("") is None
    assert p.mok_test_key("/var/lib/dkms/mok.pub is not enrolled\n") == "not-enrolled"
    assert p.mok_test_key("/var/lib/dkms/mok.pub is already enrolled\n") == "enrolled"
    assert p.mok_test_key("/c.der is already in the enrollment request\n") == "pending"
    assert p.mok_test_key("/c.der is already in the built-in trusted keyring\n") == "enrolled"
    assert p.mok_test_key("mokutil: something else") is None
    subjects = p.mok_list_enrolled(rec("el9-secureboot-unenrolled", "mok-list"))
    assert subjects == ["CN=Red Hat Secure Boot CA 5, emailAddress=secalert@redhat.com"]


def test_versions_of_tools() -> None:
    assert p.ctk_version(rec("el9-geforce", "nvidia-ctk")) == "1.17.8"
    assert p.ctk_version("NVIDIA Container Toolkit CLI version 1.18.0-rc.2\n") == "1.18.0-rc.2"
    assert p.ctk_version("nvidia-ctk: command not found") is None
    assert str(p.fm_version("\n\n\tFabric Manager version is : 535.161.08\n\n")) == "535.161.08"
    assert str(p.fm_version(rec("el9-h200-fm-mismatch", "fabricmanager"))) == "570.86.15"
    assert p.podman_version("podman version 4.9.4-rhel\n") == "4.9.4"
    assert p.podman_version("Docker version 27") is None
    assert p.getenforce("Enforcing\n") == "Enforcing"
    assert p.getenforce("Permissive") == "Permissive"
    assert p.getenforce("") is None


def test_systemctl_show() -> None:
    units = p.systemctl_show(rec("el9-h200-fm-mismatch", "systemctl"))
    assert units == {
        "nvidia-cdi-refresh.path": ("inactive", "not-found"),
        "nvidia-fabricmanager": ("failed", "enabled"),
        "nvidia-persistenced": ("active", "enabled"),
    }
    reordered = "UnitFileState=disabled\nActiveState=inactive\nId=nvidia-persistenced.service\n"
    assert p.systemctl_show(reordered) == {"nvidia-persistenced": ("inactive", "disabled")}
    assert p.systemctl_show("") == {}


def test_ls_several_directories() -> None:
    text = "/etc/cdi:\nnvidia.yaml\n\n/etc/modprobe.d:\nblacklist-nouveau.conf\nlockd.conf\n"
    dirs = ["/etc/modprobe.d", "/etc/cdi", "/var/run/cdi"]
    assert p.ls_dirs(text, dirs) == {
        "/etc/cdi": ["nvidia.yaml"],
        "/etc/modprobe.d": ["blacklist-nouveau.conf", "lockd.conf"],
    }
    assert p.ls_dirs("weird:\nx\n", dirs) == {}


def test_lsmod_and_nouveau_blacklist() -> None:
    mods = p.lsmod(rec("el9-h100", "lsmod"))
    assert {"nvidia", "nvidia_uvm", "nvidia_drm"} <= mods and "Module" not in mods
    bl = p.nouveau_blacklist({"/etc/modprobe.d/blacklist-nouveau.conf":
                              "blacklist nouveau\noptions nouveau modeset=0\n"})  # fmt: skip
    assert bl == p.Blacklist(True, True, ("/etc/modprobe.d/blacklist-nouveau.conf",))
    commented = p.nouveau_blacklist({"/etc/modprobe.d/x.conf": "# blacklist nouveau\n"})
    assert not commented.blacklisted
    installed = p.nouveau_blacklist({"/usr/lib/modprobe.d/y.conf": "install nouveau /bin/false\n"})
    assert installed.blacklisted and not installed.modeset0
    cmd = p.nouveau_blacklist({}, hostfile("el9-geforce", "/proc/cmdline"))
    assert cmd.blacklisted and len(cmd.where) == 2
    assert not p.nouveau_blacklist({}, "ro quiet modprobe.blacklist=radeon").blacklisted


def test_lspci() -> None:
    pci = p.lspci_nvidia(rec("el9-b200-proprietary", "lspci"))
    assert len(pci.gpus) == 8 and len(pci.nvswitches) == 4
    assert "[B200]" in pci.gpus[0]
    geforce = p.lspci_nvidia(rec("el9-geforce", "lspci"))
    assert len(geforce.gpus) == 1 and geforce.nvswitches == ()  # the audio function is neither


def test_rpm_and_kmods() -> None:
    q = p.rpm_q(rec("el9-l40s-no-kernel-devel", "rpm"))
    assert q.installed["kernel-core"] == (
        "5.14.0-503.23.1.el9_5.x86_64", "5.14.0-503.35.1.el9_5.x86_64")  # fmt: skip
    assert q.installed["kernel-devel"] == ("5.14.0-503.23.1.el9_5.x86_64",)
    assert "nvidia-fabricmanager" in q.missing
    kmods = p.precompiled_kmods(
        p.rpm_q(
            "kmod-nvidia-535.54.03-5.14.0-284.18.1 535.54.03-1.el9_2.x86_64\n"
            "kmod-nvidia-open-dkms 570.124.06-1.el9.noarch\n"
        )
    )
    assert kmods == [("kmod-nvidia-535.54.03-5.14.0-284.18.1", "535.54.03", "5.14.0-284.18.1")]
    assert p.kmod_covers("5.14.0-284.18.1", "5.14.0-284.18.1.el9_2.x86_64")
    assert not p.kmod_covers("5.14.0-284.18.1", "5.14.0-284.18.10.el9_2.x86_64")


def test_grubby_df() -> None:
    assert p.grubby_default("/boot/vmlinuz-5.14.0-503.35.1.el9_5.x86_64\n") == (
        "5.14.0-503.35.1.el9_5.x86_64")  # fmt: skip
    assert p.grubby_default("") is None
    text = rec("el9-l40s-no-kernel-devel", "df -P -k /boot /usr/src /var/lib/dkms")
    header, boot, *_ = text.splitlines()
    free = p.df_p("/boot", f"{header}\n{boot}\n")
    assert free == p.DiskFree("/boot", "/boot", 184320)
    assert p.df_p("/x", "df: /x: No such file or directory\n") is None


def test_cdi_spec_versions_paths_devices() -> None:
    text = hostfile("el9-h100", "/var/run/cdi/nvidia.yaml")
    spec = p.cdi_spec("/var/run/cdi/nvidia.yaml", text)
    assert isinstance(spec, p.CdiSpec)
    assert spec.kind == "nvidia.com/gpu" and str(spec.driver_version) == "550.144.03"
    assert "all" in spec.devices and "0" in spec.devices and len(spec.devices) == 17
    assert "/usr/lib64/libcuda.so.550.144.03" in spec.host_paths
    assert "/usr/bin/nvidia-cdi-hook" in spec.host_paths and "/dev/nvidia7" in spec.host_paths
    # no enable-cuda-compat hook: the driver shows in the library suffixes only
    stale = p.cdi_spec(
        "/etc/cdi/nvidia.yaml", hostfile("el9-b200-stale-cdi", "/etc/cdi/nvidia.yaml")
    )
    assert isinstance(stale, p.CdiSpec) and str(stale.driver_version) == "570.86.15"
    doc = {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [{"name": "all"}]}
    as_json = p.cdi_spec("/etc/cdi/x.json", json.dumps(doc))
    assert isinstance(as_json, p.CdiSpec) and as_json.driver_version is None
    assert "does not parse" in str(p.cdi_spec("/etc/cdi/bad.yaml", "kind: [unclosed\n"))
    assert "not a CDI spec" in str(p.cdi_spec("/etc/cdi/bad.yaml", "- 1\n- 2\n"))


def test_podman_images_and_inspect() -> None:
    listed = p.podman_images(rec("el9-h100", "podman-images"))
    assert len(listed) == 3 and listed[1][1] == ("docker.io/nvidia/cuda:12.8.1-base-rockylinux9",)
    images = p.podman_inspect(rec("el9-h100", "podman-inspect"))
    nvidia = images[1]
    assert nvidia.env["CUDA_VERSION"] == "12.8.1"
    assert nvidia.env["NVIDIA_REQUIRE_CUDA"].startswith("cuda>=12.8 brand=unknown,driver>=470")
    assert images[0].labels["io.trainimg.cuda.arch-list"].split()[-1] == "sm_120"
    assert p.podman_images("not json") == [] and p.podman_inspect("{}") == []


@pytest.mark.parametrize(
    ("name", "cc", "key"),
    [
        ("NVIDIA H100 80GB HBM3", (9, 0), "h100"),
        ("NVIDIA GH200 480GB", (9, 0), "gh200"),  # not "h200" inside "gh200"
        ("NVIDIA H200 NVL", (9, 0), "h200"),
        ("NVIDIA GeForce RTX 4090", (8, 9), "rtx4090"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", (12, 0), "rtx-pro-6000-server"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", (12, 0), "rtx-pro-6000"),
        ("NVIDIA B200", None, "b200"),  # from lspci: no compute capability to compare
        ("NVIDIA H100 PCIe", (8, 0), None),  # a name that disagrees with its CC is no match
        ("NVIDIA A10", (8, 6), "a10"),
        ("NVIDIA A10G", (8, 6), "a10"),  # not A100 (a whole word), A10 by its PCI product name
        # NVML's real names (NVIDIA's product names per PCI id), which carry a form factor
        ("NVIDIA A100-SXM4-80GB", (8, 0), "a100"),
        ("NVIDIA A100 80GB PCIe", (8, 0), "a100"),
        ("Tesla V100-SXM2-16GB", (7, 0), "v100"),
        ("NVIDIA L40S", (8, 9), "l40s"),
        ("NVIDIA L40", (8, 9), "l40"),
    ],
)
def test_catalogue_match(name: str, cc: tuple[int, int] | None, key: str | None) -> None:
    from builder.judgement.gpu_identity import by_name

    found = by_name(name, cc)
    assert (found.key if found else None) == key
