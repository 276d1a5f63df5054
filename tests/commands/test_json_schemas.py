"""Every command's JSON against its schema (docs/schemas/, draft 2020-12, checked by the
jsonschema library): the real output of matrix list/explain/check, compat, arches (on a
directory of made ELF files) and preflight (a recorded host), and verify's document from a
real Report (the container run it needs is tests/verify's). Then --json's one meaning: every
command that has it registers the one option, FILE is written whole and the text still
printed, and verify's `--json FILE IMAGE` parses as it always did."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from builder.cli import build_parser, main
from builder.commands.verify_cmd import report_document
from builder.verify.report import CheckResult, Report
from tests.arches.fatbin_bytes import PTX, SASS, container, elf64, entry
from tests.matrices import DATA
from tests.preflight.conftest import PREFLIGHT_MATRIX
from tests.preflight.fakehost import FIXTURES

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "docs" / "schemas"
M = ["--matrix", str(DATA / "minimal.yaml"), "--today", "2026-11-29"]
RUNTIME = "rocky9-cu128-py3.12-torch2.9.1-runtime"
EXCLUDED = "rocky9-cu128-py3.12-torch2.11.0-devel"


def validator(kind: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / f"{kind}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def valid(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc`, checked against the schema its own kind names."""
    errors = [e.message for e in validator(doc["kind"]).iter_errors(doc)]
    assert errors == [], (doc["kind"], errors[:5])
    return doc


def printed(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    main(list(argv))
    out, err = capsys.readouterr()
    assert out, err
    doc: dict[str, Any] = json.loads(out)
    return doc


@pytest.fixture
def libs(tmp_path: Path) -> Path:
    both = container(entry(SASS, 90), entry(SASS, 100), entry(PTX, 120))
    (tmp_path / "libboth.so").write_bytes(elf64({".nv_fatbin": both + both}))
    (tmp_path / "libcpu.so").write_bytes(elf64({".text": b"\x90" * 16}))
    return tmp_path


def test_every_command_s_real_output_is_valid_against_its_schema(
    capsys: pytest.CaptureFixture[str], libs: Path
) -> None:
    docs = [
        printed(capsys, "matrix", "list", *M, "--all", "--json"),
        printed(capsys, "matrix", "explain", RUNTIME, *M, "--json"),
        printed(capsys, "matrix", "explain", EXCLUDED, *M, "--json"),
        printed(capsys, "matrix", "check", *M[:2], "--today", "2028-05-01", "--json"),
        printed(capsys, "compat", RUNTIME, *M, "--driver", "570.124.06", "--gpu", "h100", "--json"),
        printed(capsys, "compat", "--require", "cuda>=13.2", "--driver", "570.124.06", "--json"),
        printed(capsys, "arches", str(libs), "--gpu", "b200", "--gpu", "sm_80", "--json", "--all"),
        printed(capsys, "preflight", "--matrix", str(PREFLIGHT_MATRIX), "--from",
                str(FIXTURES / "el9-geforce"), "--target-driver", "565.57.01", "--json"),
        printed(capsys, "config", "show", "--registry", "reg.example.com/team", "--json"),
    ]  # fmt: skip
    checks = [CheckResult.of("labels", "passed", details=("ok",), seconds=0.5),
              CheckResult.of("nvidia_smi", "skipped", "no GPU on this host"),
              CheckResult.of("train_fp8", "failed", "loss did not fall")]  # fmt: skip
    gpu = {"attached": False, "reason": "no CDI spec"}
    docs.append(report_document(Report("i:1", "sha256:1", None, False, "podman", "c", gpu,
                                       checks, 1)))  # fmt: skip
    for doc in docs:
        valid(doc)
    kinds = [d["kind"] for d in docs]
    assert sorted(set(kinds)) == sorted(p.name.removesuffix(".schema.json") for p in
                                        SCHEMAS.glob("*.schema.json"))  # fmt: skip
    assert [d["schema"] for d in docs if d["kind"] == "trainimg.preflight"] == [3]
    # the findings are paired: one code, one severity, one message each, worst first
    compat = docs[4]["verdict"]["findings"]
    ranks = ["block", "warn", "ok", "skip"]
    assert [ranks.index(f["severity"]) for f in compat] == sorted(
        ranks.index(f["severity"]) for f in compat
    )
    assert {"codes", "reasons"}.isdisjoint(docs[4]["verdict"])
    failed = next(d for d in docs if d["kind"] == "trainimg.verify")["checks"][2]
    assert (
        failed | {"code": "train_fp8", "severity": "block", "message": "loss did not fall"}
        == failed
    )


def test_the_schemas_refuse_what_they_must(capsys: pytest.CaptureFixture[str]) -> None:
    """A schema that accepted anything would pass the test above: each bites."""
    doc = printed(capsys, "compat", "--require", "cuda>=12.0", "--driver", "570.124.06", "--json")
    v = validator("trainimg.compat")
    assert v.is_valid(doc)
    assert not v.is_valid({**doc, "schema": 2})
    assert not v.is_valid({**doc, "kind": "trainimg.arches"})
    assert not v.is_valid({k: val for k, val in doc.items() if k != "schema"})
    unpaired = {"code": "driver.eol", "severity": "warn"}  # no message
    assert not v.is_valid({**doc, "verdict": {**doc["verdict"], "findings": [unpaired]}})
    assert not v.is_valid({**doc, "verdict": {**doc["verdict"], "codes": []}})
    listed = printed(capsys, "matrix", "list", *M, "--json")
    cell = {k: val for k, val in listed["cells"][0].items() if k != "cell_hash"}
    assert not validator("trainimg.matrix.list").is_valid({**listed, "cells": [cell]})


def test_one_finding_shape_in_every_schema() -> None:
    schemas = {p.name: json.loads(p.read_text()) for p in SCHEMAS.iterdir()}
    # config show reports settings, no findings: the only schema without the shape
    assert [n for n, s in schemas.items() if "finding" not in s.get("$defs", {})] == [
        "trainimg.config.schema.json"
    ]
    shapes = {
        n: s["$defs"]["finding"] for n, s in schemas.items() if n != "trainimg.config.schema.json"
    }
    assert len(shapes) == 7 and len({json.dumps(s, sort_keys=True) for s in shapes.values()}) == 1
    assert next(iter(shapes.values()))["required"] == ["code", "severity", "message"]


def _json_options() -> dict[str, Any]:
    """Every parser's --json action, by command path ('matrix list', 'compat', ...)."""
    found: dict[str, Any] = {}

    def walk(parser: Any, path: str) -> None:
        for action in parser._actions:
            if "--json" in action.option_strings:
                found[path] = action
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}".strip())

    walk(build_parser(), "")
    return found


def test_every_json_option_is_the_one_option_and_names_a_documented_kind() -> None:
    options = _json_options()
    assert sorted(options) == ["arches", "compat", "config show", "matrix check",
                               "matrix explain", "matrix list", "preflight", "verify"]  # fmt: skip
    json_md = (REPO / "docs" / "json.md").read_text()
    for path, action in options.items():
        assert (action.nargs, action.const, action.metavar) == ("?", "-", "FILE"), path
        kind = re.search(r"\((trainimg\.[a-z.]+),", action.help)
        assert kind is not None and (SCHEMAS / f"{kind[1]}.schema.json").is_file(), path
        assert f"`{kind[1]}`" in json_md and f"`trainimg {path}" in json_md, path


def test_json_file_is_written_whole_and_the_text_still_printed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "new" / "list.json"
    assert main(["matrix", "list", *M, "--json", str(target)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("CELL ") and valid(json.loads(target.read_text()))["cells"]
    assert [p.name for p in target.parent.iterdir()] == ["list.json"]  # no temporary left
    # --json=FILE after a positional, and `--json -` is stdout
    assert main(["compat", RUNTIME, *M, "--driver", "570.124.06", f"--json={target}"]) == 3
    assert "verdict" in capsys.readouterr().out and valid(json.loads(target.read_text()))
    assert main(["matrix", "check", *M, "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "trainimg.matrix.check"


def test_verify_keeps_json_file_before_its_image() -> None:
    words = ["verify", "--json", "r.json", "localhost/x:1"]
    args = build_parser(words).parse_args(words)
    assert (args.json, args.target) == ("r.json", "localhost/x:1")
    words = ["verify", "localhost/x:1", "--json"]
    args = build_parser(words).parse_args(words)
    assert (args.json, args.target) == ("-", "localhost/x:1")
