"""The planner, the pasteable line and the SDK arguments: pure, milliseconds."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import signal
import struct
from pathlib import Path

import pytest

from builder.engines.docker import docker_create_options as docker_kwargs
from builder.engines.podman import UNLIMITED
from builder.engines.podman import libpod_create_options as podman_kwargs
from builder.host import this_host
from builder.judgement.gpu_identity import identify
from builder.launch import cli_line, hostfacts
from builder.launch.gpucheck import check_driver
from builder.launch.plan import TRAINER_COMMANDS, plan_run
from builder.launch.request import (
    ACL_GROUP,
    ACL_GROUP_OBJ,
    ACL_MASK,
    ACL_OTHER,
    ACL_USER,
    ACL_USER_OBJ,
    Directory,
    LaunchError,
    Rendezvous,
    parse_env,
    parse_gpus,
    parse_rdzv,
)
from tests.launch.helpers import IMAGE, host, image, request
from trainer.cli import build_parser as trainer_parser

FIXTURES = Path(__file__).resolve().parents[1] / "preflight" / "fixtures"


def test_rootless_podman_all_gpus_selinux_line() -> None:
    h = host(
        selinux_enforcing=True,
        env={
            "NCCL_DEBUG": "INFO",
            "TORCH_LOGS": "+dynamo",
            "AWS_SECRET_ACCESS_KEY": "x",
            "CUDA_VISIBLE_DEVICES": "0,1",
            "NCCL_SOCKET_IFNAME": "ib0",
            "HOME": "/home/u",
        },
    )
    req = request(gpus="all", data="/srv/data", ckpt="/srv/ckpt", trainer_args=("--resume",))
    run = plan_run(req, h, image())
    line = cli_line.shell_line(run)
    # rootless: no memlock it could not set; label=disable: no relabel that would change
    # nothing; no CUDA_VISIBLE_DEVICES (the container numbers its GPUs from 0); no IFNAME
    # without a network; two GPUs, two workers, through the one launcher
    assert line == (
        "podman run --rm --name t --label io.trainimg.run=t --userns=keep-id --user 1234:1234 "
        "--network=none --ipc=host --device nvidia.com/gpu=all "
        "--security-opt label=disable --volume /srv/data:/data:ro "
        "--volume /srv/ckpt:/ckpt:rw --env NCCL_DEBUG=INFO "
        "--env TORCH_LOGS=+dynamo --stop-signal SIGTERM --stop-timeout 120 "
        "--entrypoint /opt/venv/bin/python "
        f"{IMAGE} -m trainer.launch --nnodes=1 --nproc-per-node=2 --standalone "
        "--max-restarts=0 -m trainer train --resume --ckpt-dir /ckpt"
    )
    assert "AWS_SECRET" not in line and "HOME" not in line
    assert any("CUDA_VISIBLE_DEVICES=0,1 is not passed in" in n for n in run.notes)
    assert any("locked memory stays at your own limit" in n for n in run.notes)


@pytest.mark.parametrize(
    ("gpus", "devices"),
    [
        (("2", "3"), ["nvidia.com/gpu=2", "nvidia.com/gpu=3"]),
        (("GPU-8f6e1c2a-0000-1111-2222-333344445555",),
         ["nvidia.com/gpu=GPU-8f6e1c2a-0000-1111-2222-333344445555"]),
        (2, ["nvidia.com/gpu=0", "nvidia.com/gpu=1"]),
    ],
)  # fmt: skip
def test_gpus_by_index_or_uuid_and_one_worker_each(
    gpus: tuple[str, ...] | int, devices: list[str]
) -> None:
    uuid = "nvidia.com/gpu=GPU-8f6e1c2a-0000-1111-2222-333344445555"
    cdi = (*(f"nvidia.com/gpu={i}" for i in range(8)), uuid, "nvidia.com/gpu=all")
    run = plan_run(request(gpus=gpus), host(cdi_devices=cdi, gpu_count=8), image())
    assert list(run.cdi_devices) == devices
    workers = f"--nproc-per-node={len(devices)}"
    assert workers in run.command if len(devices) > 1 else run.command[0] == "train"
    docker = plan_run(request(gpus=gpus), host(engine="docker", rootless=False), image())
    want = f"device={','.join(gpus)}" if isinstance(gpus, tuple) else str(gpus)
    assert docker.gpu_request == want
    _, hostcfg = docker_kwargs(docker)
    request_ids = hostcfg["device_requests"][0].get("DeviceIDs")
    assert request_ids == (list(gpus) if isinstance(gpus, tuple) else [])


def test_the_gpus_flag() -> None:
    assert parse_gpus("2,3") == ("2", "3") and parse_gpus("device=5") == ("5",)
    assert parse_gpus("2") == 2 and parse_gpus("all") == "all"
    assert parse_gpus("GPU-8f6e1c2a-0000-1111") == ("GPU-8f6e1c2a-0000-1111",)


def test_ifname_goes_in_only_with_a_network_and_infiniband_between_nodes() -> None:
    env = {"GLOO_SOCKET_IFNAME": "eth1", "NCCL_SOCKET_IFNAME": "ib0", "NCCL_DEBUG": "WARN"}
    alone = plan_run(request(nproc_per_node=2), host(env=env), image())
    assert dict(alone.env) == {"NCCL_DEBUG": "WARN"} and alone.network == "none"
    rdma = ("/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0")
    h = host(env=env, rootless=False, uid=0, gid=0, rdma_devices=rdma, dirs={})
    nodes = plan_run(request(nnodes=2, rdzv=Rendezvous("n0", 29500), gpus="all"), h, image())
    assert dict(nodes.env) == env and nodes.network == "host"
    assert nodes.devices == rdma and nodes.ulimits == (("memlock", -1, -1),)
    argv = cli_line.argv(nodes)
    assert argv[argv.index("/dev/infiniband/uverbs0") - 1] == "--device"
    assert podman_kwargs(nodes)["devices"][-2:] == list(rdma)
    one = plan_run(request(gpus="all"), h, image())
    assert one.devices == ()  # one node: NCCL needs no fabric


def test_rootful_docker_one_gpu_maps_the_caller() -> None:
    h = host(engine="docker", rootless=False, cdi_devices=())
    run = plan_run(request(gpus=1, ckpt="/srv/ckpt"), h, image())
    argv = cli_line.argv(run)
    assert argv[:2] == ["docker", "run"]
    assert argv[argv.index("--gpus") + 1] == "1"
    assert argv[argv.index("--user") + 1] == "1234:1234"
    assert "HOME=/tmp" in argv and not any(a.startswith("--userns") for a in argv)
    assert argv[-5:] == ["train", "--steps", "8", "--ckpt-dir", "/ckpt"]  # one process: no torchrun
    create, hostcfg = docker_kwargs(run)
    assert hostcfg["device_requests"][0]["Count"] == 1
    assert create["stop_timeout"] == 120 and create["user"] == "1234:1234"
    assert hostcfg["binds"] == {"/srv/ckpt": {"bind": "/ckpt", "mode": "rw"}}


def test_root_caller_keeps_the_image_user_and_cpu_needs_no_nccl_settings() -> None:
    h = host(
        rootless=False,
        uid=0,
        gid=0,
        dirs={"/srv/ckpt": Directory("/srv/ckpt", True, True, 1000, 1000, 0o755)},
    )
    run = plan_run(request(ckpt="/srv/ckpt"), h, image())
    assert run.user is None and run.userns is None
    assert run.ipc is None and run.ulimits == () and run.cdi_devices == ()


def test_the_line_survives_the_shell() -> None:
    args = ("--set", "train.seed=1; rm -rf /", "--metrics-file", "/ckpt/it's.jsonl")
    run = plan_run(request(trainer_args=args), host(), image())
    assert shlex.split(cli_line.shell_line(run)) == cli_line.argv(run)
    assert cli_line.argv(run)[-4:] == list(args)


def test_podman_sdk_arguments_match_the_plan() -> None:
    run = plan_run(
        request(gpus=2, data="/srv/data", ckpt="/srv/ckpt"),
        host(selinux_enforcing=True, rootless=False, uid=1234, gid=1234),
        image(),
    )
    kw = podman_kwargs(run)
    assert kw["devices"] == ["nvidia.com/gpu=0", "nvidia.com/gpu=1"]
    assert kw["ulimits"] == [{"Name": "memlock", "Soft": UNLIMITED, "Hard": UNLIMITED}]
    assert kw["stop_signal"] == int(signal.SIGTERM) and kw["stop_timeout"] == 120
    assert kw["volumes"]["/srv/data"] == {"bind": "/data", "extended_mode": ["ro"]}
    assert "userns_mode" not in kw and kw["user"] == "1234:1234"
    assert kw["security_opt"] == ["disable"]
    assert kw["entrypoint"] == ["/opt/venv/bin/python", "-m", "trainer.launch"]
    cpu = plan_run(request(ckpt="/srv/ckpt"), host(selinux_enforcing=True), image())
    assert podman_kwargs(cpu)["volumes"]["/srv/ckpt"]["extended_mode"] == ["rw", "Z"]


def test_multi_node_ranks() -> None:
    rdzv = Rendezvous("node0", 29500)
    lines = [
        cli_line.argv(
            plan_run(
                request(nnodes=2, node_rank=r, rdzv=rdzv, gpus="all", ckpt="/srv/ckpt"),
                host(selinux_enforcing=True),
                image(),
            )
        )
        for r in (0, 1)
    ]
    for rank, argv in enumerate(lines):
        assert "--network=host" in argv
        assert "--rdzv-backend=c10d" in argv and "--rdzv-endpoint=node0:29500" in argv
        assert f"--node-rank={rank}" in argv and "--nnodes=2" in argv
        assert "--volume" in argv and "/srv/ckpt:/ckpt:rw" in argv  # label=disable: as it is
    assert "--rdzv-conf=is_host=true" in lines[0] and "--rdzv-conf=is_host=false" in lines[1]


@pytest.mark.parametrize(
    ("req", "h", "img", "says"),
    [
        (request(gpus="all"), host(cdi_devices=()), image(), "nvidia-ctk cdi generate"),
        (request(gpus=4), host(), image(), "nvidia.com/gpu=2, nvidia.com/gpu=3"),
        (request(), host(), image(labels={}), "io.trainimg.trainer.version"),
        (
            request(data="/nope"),
            host(dirs={"/nope": Directory("/nope", False)}),
            image(),
            "--data /nope: no such directory",
        ),
        (
            request(data="/srv/d"),
            host(dirs={"/srv/d": Directory("/srv/d", True, True, 0, 0, 0o700)}),
            image(),
            "cannot read it (owner 0:0, mode 700); grant it with `setfacl -m u:1234:rx /srv/d` "
            "or `chmod o+rx /srv/d`",
        ),
        (
            request(ckpt="/srv/c"),
            host(dirs={"/srv/c": Directory("/srv/c", True, True, 0, 0, 0o755)}),
            image(),
            "cannot write to it",
        ),
        (request(nnodes=2), host(), image(), "--nnodes 2 needs --rdzv HOST:PORT"),
        (
            request(nnodes=2, node_rank=2, rdzv=Rendezvous("h", 1)),
            host(),
            image(),
            "--node-rank 2: expected 0 .. 1",
        ),
    ],
)
def test_bad_requests_say_what_to_do(req: object, h: object, img: object, says: str) -> None:
    with pytest.raises(LaunchError) as err:
        plan_run(req, h, img)  # type: ignore[arg-type]
    assert says in str(err.value)
    assert err.value.exit_code == 2


@pytest.mark.parametrize(
    ("fn", "text", "says"),
    [
        (parse_gpus, "0", "expected all, none, a number of GPUs"),
        (parse_gpus, "some", "expected all, none, a number of GPUs"),
        (parse_gpus, "2,2", "by index or UUID"),
        (parse_gpus, "2;rm", "by index or UUID"),
        (parse_rdzv, "node0:99999", "expected HOST:PORT"),
        (parse_rdzv, "a b:1", "expected HOST:PORT"),
        (parse_env, ["NOVALUE"], "expected NAME=VALUE"),
    ],
)
def test_bad_flags(fn: object, text: object, says: str) -> None:
    with pytest.raises(LaunchError, match=says):
        fn(text)  # type: ignore[operator]


def test_rdzv_default_port() -> None:
    assert parse_rdzv("node0") == Rendezvous("node0", 29500)


def test_driver_check() -> None:
    """run's pre-start check is the one image x host judgement (builder/judgement/image.py);
    tests/judgement/test_one_verdict.py holds it to compat's and preflight's answers."""
    day = dt.date(2025, 6, 1)  # R570 supported (its end of life is 2026-02-28)
    img = image()
    h100 = (identify(nvml_name="NVIDIA H100 80GB HBM3"),) * 2
    ok = check_driver(IMAGE, img, host(driver="570.124.06", gpus=h100), True, day)
    assert ok.ok and "ok on driver 570.124.06" in ok.message
    old = check_driver(
        IMAGE,
        img,
        host(driver="535.54.03", gpus=(identify(cc=(8, 9), nvml_brand="GeForce"),)),
        True,
        day,
    )
    assert not old.ok and "[require.unsatisfied]" in old.message and "804" in old.message
    # a Tesla-brand GPU on the 535 branch is admitted by the forward-compatibility window
    fwd = check_driver(
        IMAGE,
        img,
        host(driver="535.54.03", gpus=(identify(cc=(9, 0), nvml_brand="Tesla"),)),
        True,
        day,
    )
    assert fwd.ok and "fwd-compat" in fwd.message
    # an image compiled for sm_80 and sm_90 on a B200: no kernel image, whatever the label says
    hopper = image(labels={"io.trainimg.cuda.arch-list": "sm_80 sm_90"})
    b200 = (identify(nvml_name="NVIDIA B200"),) * 2
    no_sass = check_driver(IMAGE, hopper, host(gpus=b200, driver_flavour="open"), True, day)
    assert not no_sass.ok and "[image.no-kernel-image]" in no_sass.message
    assert "570.124.06" in no_sass.message and "570.124.6" not in no_sass.message
    none = check_driver(IMAGE, img, host(driver=None), gpus=True)
    assert not none.ok and "--gpus none" in none.message
    na = check_driver(IMAGE, img, host(driver=None), gpus=False)
    assert na.ok and not na.applicable and "not applicable" in na.message
    cpu = check_driver(IMAGE, image(env={}), host(), gpus=True)
    assert cpu.ok and "CPU image" in cpu.message


def test_hostfacts_read_a_recorded_gpu_host(tmp_path: Path) -> None:
    """The preflight fixture host el9-h100 (recorded files, origins in its fixture.yaml)."""
    root = FIXTURES / "el9-h100" / "files"
    assert "nvidia.com/gpu=all" in this_host.cdi_devices(root)
    driver, _, _ = this_host.nvidia(root)
    assert driver is not None and driver.count(".") >= 1
    assert hostfacts.selinux_enforcing(root) is False
    (tmp_path / "sys/fs/selinux").mkdir(parents=True)
    (tmp_path / "sys/fs/selinux/enforce").write_text("1")
    assert hostfacts.selinux_enforcing(tmp_path) is True
    assert this_host.cdi_devices(tmp_path) == ()
    assert this_host.nvidia(tmp_path) == (None, (), 0)


def test_port_in_use() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert hostfacts.port_in_use("127.0.0.1", port)
    assert not hostfacts.port_in_use("127.0.0.1", port)


@pytest.mark.parametrize(
    ("argv", "data", "trainer"),
    [
        (["run", "IMG", "--", "--preset", "nope"], None, ["--preset", "nope"]),
        (["run", "IMG", "--data", "/d", "--", "--steps", "1"], "/d", ["--steps", "1"]),
        (["run", "IMG", "--data", "/d"], "/d", []),
        (
            ["run", "--data", "/d", "IMG", "--", "--data", "/data/t.bin"],
            "/d",
            ["--data", "/data/t.bin"],
        ),  # the trainer's own --data stays the trainer's
    ],
)
def test_trainer_args_follow_the_double_dash(
    argv: list[str], data: str | None, trainer: list[str]
) -> None:
    from builder.cli import build_parser

    args = build_parser().parse_args(argv)
    assert (args.target, args.data, args.trainer_args) == ("IMG", data, trainer)


def _acl(*entries: tuple[int, int, int]) -> bytes:
    """system.posix_acl_access as the kernel stores it (version 2, little-endian entries)."""
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)


UNDEF = 0xFFFFFFFF


def test_access_as_access2_decides_with_acls() -> None:
    """A directory only an ACL opens (the case mode bits alone refused with wrong advice)."""
    blob = _acl(
        (ACL_USER_OBJ, 7, UNDEF), (ACL_USER, 7, 1000), (ACL_USER, 5, 2000),
        (ACL_GROUP_OBJ, 5, UNDEF), (ACL_GROUP, 7, 3000), (ACL_MASK, 5, UNDEF),
        (ACL_OTHER, 0, UNDEF),
    )  # fmt: skip
    d = Directory("/srv/c", True, True, 0, 0, 0o750, hostfacts.parse_acl(blob))
    assert d.allows(1000, 1000, 5) and not d.allows(1000, 1000, 7)  # the mask caps uid 1000
    assert d.allows(2000, 2000, 5) and not d.allows(4000, 4000, 5)  # others: nothing
    assert d.allows(4000, 3000, 5) and not d.allows(4000, 3000, 7)  # named group, masked
    open_acl = Directory("/srv/c", True, True, 0, 0, 0o770, hostfacts.parse_acl(_acl(
        (ACL_USER_OBJ, 7, UNDEF), (ACL_USER, 7, 1000), (ACL_GROUP_OBJ, 5, UNDEF),
        (ACL_MASK, 7, UNDEF), (ACL_OTHER, 0, UNDEF),
    )))  # fmt: skip
    assert open_acl.allows(1000, 1000, 7)
    plan_run(request(ckpt="/srv/c"), host(uid=0, gid=0, rootless=False,
             dirs={"/srv/c": open_acl}), image())  # fmt: skip
    assert hostfacts.parse_acl(b"junk") == () and hostfacts.parse_acl(_acl()[:3]) == ()
    mode_only = Directory("/d", True, True, 0, 1000, 0o750)
    assert mode_only.allows(1000, 1000, 5) and not mode_only.allows(1000, 1000, 7)
    assert not mode_only.allows(1000, 1001, 1) and mode_only.allows(0, 5, 7)


def test_a_real_acl_is_read(tmp_path: Path) -> None:
    """hostfacts.directory reads the ACL the kernel keeps (written here as setfacl would)."""
    d = tmp_path / "ckpt"
    d.mkdir(mode=0o700)
    d.chmod(0o700)
    blob = _acl((ACL_USER_OBJ, 7, UNDEF), (ACL_USER, 7, 1000), (ACL_GROUP_OBJ, 0, UNDEF),
                (ACL_MASK, 7, UNDEF), (ACL_OTHER, 0, UNDEF))  # fmt: skip
    try:
        os.setxattr(d, hostfacts.ACL_XATTR, blob)
    except OSError as exc:
        pytest.fail(f"{tmp_path} does not take POSIX ACLs ({exc}): the test needs a filesystem "
                    "that does (ext4, xfs, tmpfs)")  # fmt: skip
    seen = hostfacts.directory(str(d))
    assert seen.acl and seen.allows(1000, 1000, 7) and not seen.allows(1001, 1001, 1)


def test_dry_run_with_engine_named_needs_no_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A login node: no engine answers anywhere, yet the line for the compute node is printed,
    for the cell as trainimg builds it (the one launcher, its user, its GPUs)."""
    from builder import cli

    monkeypatch.setenv("CONTAINER_HOST", f"unix://{tmp_path}/nothing-here.sock")
    monkeypatch.setenv("TRAINIMG_PODMAN_ROOT", "")
    cell = "rocky9-cu128-py3.12-torch2.9.1-runtime"
    argv = ["run", cell, "--engine", "podman", "--dry-run", "--nproc-per-node", "2"]
    assert cli.main([*argv, "--", "--steps", "8"]) == 0
    out, err = capsys.readouterr()
    argv_out = shlex.split(out)
    assert argv_out[:3] == ["podman", "run", "--rm"]
    assert argv_out[argv_out.index("--entrypoint") + 2] == f"localhost/trainimg:{cell}"
    assert "-m" in argv_out and "trainer.launch" in argv_out and "--nproc-per-node=2" in argv_out
    assert "no engine asked (--dry-run --engine podman)" in err
    assert "Traceback" not in err
    # GPUs for a compute node, from a login node without a CDI spec of its own
    assert cli.main(["run", cell, "--engine", "podman", "--dry-run", "--gpus", "2,3"]) == 0
    out, err = capsys.readouterr()
    assert "--device nvidia.com/gpu=2 --device nvidia.com/gpu=3" in out
    assert "the spec is checked where it runs" in err and "--nproc-per-node=2" in out
    without = cli.main(["run", cell, "--dry-run", "--", "--steps", "8"])
    assert without == 2 and "unix://" in capsys.readouterr().err  # it did look for one


def test_the_stop_note_promises_a_checkpoint_only_where_one_is_mounted() -> None:
    """Without --ckpt a stop saves nothing (the trainer's exit 4): the note says so; with it,
    the note names the host directory the checkpoint lands in, not only the container's /ckpt."""
    bare = plan_run(request(), host(), image()).notes
    assert any("nothing is saved without --ckpt (exit 4)" in n for n in bare)
    assert not any("checkpoint" in n and "nothing" not in n for n in bare if n.startswith("stop"))
    mounted = plan_run(request(ckpt="/srv/ckpt"), host(), image()).notes
    assert any("checkpoint into /srv/ckpt (/ckpt in the container; exit 143)" in n for n in mounted)


def test_run_knows_every_trainer_command() -> None:
    """`trainimg run IMAGE -- gate ...` runs the trainer's gate, not `train gate`: the planner's
    list is the trainer's own subcommands (the builder never imports the trainer)."""
    (sub,) = [a for a in trainer_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert sorted(TRAINER_COMMANDS) == sorted(sub.choices)
    run = plan_run(request(trainer_args=("gate", "--seeds", "3")), host(), image())
    assert run.command[-3:] == ("gate", "--seeds", "3") and "train" not in run.command[-4:]
