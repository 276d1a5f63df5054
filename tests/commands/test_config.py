"""The config file and its precedence (builder/config.py): flag > environment > file > default
for every key, a bad file refused naming its path, line and key, `trainimg config show` saying
where each value came from, and the commands that take their defaults from it (push's, slurm's
and prune's registry, the engine, the wheelhouse, preflight's inventory)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder import cli, config
from builder.commands.preflight_cmd import _targets
from builder.errors import TrainimgError
from tests.matrices import DATA

PATH = Path("/etc/cfg/trainimg/config.toml")
FILE = 'registry = "file.example.com/team"\nengine = "docker"\nwheelhouse = "/file/wheels"\n'
ENV = {
    "TRAINIMG_REGISTRY": "env.example.com/team",
    "TRAINIMG_ENGINE": "podman",
    "TRAINIMG_WHEELHOUSE": "/env/wheels",
}


def test_precedence_flag_then_environment_then_file_then_default() -> None:
    flags = {"registry": "flag.example.com/t", "inventory": "flag.ini"}
    got = config.resolve_all(flags, ENV, FILE + 'inventory = "file.ini"\n', PATH)
    assert {k: (s.value, s.source) for k, s in got.items()} == {
        "registry": ("flag.example.com/t", "flag"),
        "engine": ("podman", "env $TRAINIMG_ENGINE"),
        "wheelhouse": ("/env/wheels", "env $TRAINIMG_WHEELHOUSE"),
        "inventory": ("flag.ini", "flag"),
    }
    got = config.resolve_all({}, {"TRAINIMG_ENGINE": ""}, FILE, PATH)  # empty: unset
    assert {k: (s.value, s.source) for k, s in got.items()} == {
        "registry": ("file.example.com/team", str(PATH)),
        "engine": ("docker", str(PATH)),
        "wheelhouse": ("/file/wheels", str(PATH)),
        "inventory": (None, "default"),
    }
    got = config.resolve_all({}, {}, None, PATH)
    assert got["wheelhouse"] == config.Setting("wheelhouse", ".cache/wheelhouse", "default")
    assert got["registry"].value is None and got["engine"].value is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('registry = "x\n', f"{PATH}:1: not valid TOML"),
        ('# mine\nregistry = "r/x"\nregistyr = "r/y"\n', f"{PATH}:3: unknown key 'registyr': "
         "valid keys are registry, engine, wheelhouse, inventory"),
        ("\nwheelhouse = 3\n", f"{PATH}:2: wheelhouse = 3: expected a non-empty string"),
        ('engine = "dokcer"\n', f"{PATH}:1: engine = 'dokcer': expected 'podman' or 'docker'"),
        ("[registry]\nhost = 'r'\n", f"{PATH}:1: registry = {{'host': 'r'}}: expected a non-"),
        ('inventory = ""\n', f"{PATH}:1: inventory = '': expected a non-empty string"),
    ],
)  # fmt: skip
def test_a_bad_file_names_its_path_line_key_and_what_is_valid(text: str, says: str) -> None:
    with pytest.raises(TrainimgError) as info:
        config.resolve_all({}, {}, text, PATH)
    assert str(info.value).startswith(says)
    assert info.value.exit_code == 2


def test_a_bad_engine_variable_is_named_and_the_file_is_found_by_xdg() -> None:
    with pytest.raises(TrainimgError, match=r"\$TRAINIMG_ENGINE=dokcer is not an engine"):
        config.resolve_all({}, {"TRAINIMG_ENGINE": "dokcer"}, None, PATH)
    assert config.config_path({"XDG_CONFIG_HOME": "/x", "HOME": "/h"}) == Path(
        "/x/trainimg/config.toml"
    )
    for relative_or_empty in ("", "rel/dir"):  # the XDG rule: ignored, so ~/.config
        got = config.config_path({"XDG_CONFIG_HOME": relative_or_empty, "HOME": "/h"})
        assert got == Path("/h/.config/trainimg/config.toml")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty config home and environment; returns the config file's path (not written)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for key in config.SETTING_KEYS.values():
        if key.env:
            monkeypatch.delenv(key.env, raising=False)
    path = tmp_path / "xdg" / "trainimg" / "config.toml"
    path.parent.mkdir(parents=True)
    return path


def test_config_show_says_where_each_value_came_from(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home.write_text(FILE)
    monkeypatch.setenv("TRAINIMG_ENGINE", "podman")
    assert cli.main(["config", "show", "--json", "--wheelhouse", "/flag"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["kind"] == "trainimg.config" and shown["schema"] == 1
    assert shown["file"] == str(home) and shown["file_exists"]
    assert shown["settings"] == {
        "registry": {"value": "file.example.com/team", "source": str(home)},
        "engine": {"value": "podman", "source": "env $TRAINIMG_ENGINE"},
        "wheelhouse": {"value": "/flag", "source": "flag"},
        "inventory": {"value": None, "source": "default"},
    }
    assert cli.main(["config", "show"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"config file: {home}\n")
    words = " ".join(out.split())  # a line past 80 columns puts its source on the next
    assert f"registry file.example.com/team ({home}) engine podman (env $TRAINIMG_ENGINE)" in words
    assert words.endswith("inventory - (default)")
    assert out.splitlines()[2] == f"              ({home})"  # too long beside its value
    home.write_text('registry = "r/x"\nengine = "dockr"\n')
    assert cli.main(["config", "show"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"trainimg: error: {home}:2: engine = 'dockr'") and not out
    assert "Traceback" not in err
    home.unlink()
    home.mkdir()  # not a file: named, exit 2
    assert cli.main(["config", "show"]) == 2
    assert f"{home}: cannot read the config file: Is a directory" in capsys.readouterr().err


def test_the_commands_take_their_defaults_from_the_file(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = tmp_path / "fleet.ini"
    inventory.write_text("[gpu]\nnode1 ansible_host=10.0.0.1\n")
    home.write_text(FILE + f'inventory = "{inventory}"\n')
    build = cli.build_parser(["build"]).parse_args(["build"])
    assert (build.engine, build.wheelhouse) == ("docker", Path("/file/wheels"))
    flagged = cli.build_parser(["build"]).parse_args(["build", "--engine", "podman"])
    assert flagged.engine == "podman"  # the flag wins
    slurm = cli.build_parser(["slurm"]).parse_args(["slurm", "x"])
    assert slurm.registry == "file.example.com/team"
    preflight = cli.build_parser(["preflight"]).parse_args(["preflight"])
    assert [t.name for t in _targets(preflight)] == ["node1"]
    preflight = cli.build_parser(["preflight"]).parse_args(["preflight", "--hosts", "local://"])
    assert [t.name for t in _targets(preflight)] == ["local://"]  # --hosts: not the file's
    prune = cli.build_parser(["prune"]).parse_args(["prune"])
    assert prune.registry is None  # a plain prune never turns into a registry's
    monkeypatch.setenv("TRAINIMG_REGISTRY", "bad ref")  # refused before any network
    matrix = ["--matrix", str(DATA / "minimal.yaml")]
    for argv in (["push", *matrix], ["prune", *matrix, "--registry"]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert "registry bad ref (from env $TRAINIMG_REGISTRY)" in err, err


def test_without_a_registry_push_and_prune_say_every_way_to_give_one(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = ["--matrix", str(DATA / "minimal.yaml")]
    for argv in (["push", *matrix], ["prune", *matrix, "--registry"]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert "--registry HOST[:PORT]/REPO" in err and "$TRAINIMG_REGISTRY" in err, err
        assert "`registry` in the config file" in err
