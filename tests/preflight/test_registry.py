"""Every preflight id is written once, in its `@check`: the id lists, the gather steps each check
reads, the docs table and --help are read from the registry or held to it here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from builder.cli import build_parser
from builder.judgement.registry import ids, registered
from builder.preflight import checks
from builder.preflight.checks.reach import REACH_ID
from builder.preflight.gather import REPOS_STEP, STEPS
from builder.preflight.impact import IMPACT_ID

DOCS = Path(__file__).resolve().parents[2] / "docs" / "preflight.md"


def doc_table_ids() -> list[str]:
    """The first column of the docs' check table (the one whose header starts `| id |`)."""
    lines = DOCS.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| id | what it looks at"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        m = re.match(r"\| `([^`]+)` \|", line)
        assert m, f"a check row without an id in backticks: {line[:60]}"
        rows.append(m[1])
    return rows


def test_the_docs_table_lists_the_registered_ids_in_report_order() -> None:
    assert doc_table_ids() == list(checks.CHECK_IDS)


def test_the_id_list_is_the_registry_s() -> None:
    host = ids("host")
    assert host[0] == REACH_ID  # the connection comes first in every report
    assert (*host, IMPACT_ID) == checks.CHECK_IDS
    assert IMPACT_ID in ids("image")
    assert len(set(checks.CHECK_IDS)) == len(checks.CHECK_IDS)


def test_every_host_check_names_the_gather_steps_it_reads() -> None:
    steps = {name for name, _ in STEPS} | {REPOS_STEP}
    for r in registered("host"):
        if r.id == REACH_ID:
            assert r.reads == ()  # judged from the connection, before any step runs
            continue
        assert r.reads, r.id
        assert set(r.reads) <= steps, (r.id, set(r.reads) - steps)
        assert checks.STEP_OF[r.id] == r.reads


def test_a_check_registered_twice_is_refused() -> None:
    from builder.judgement.registry import check

    with pytest.raises(ValueError, match="registered twice"):
        check("host.os", "host")(lambda: None)


def test_help_lists_the_registered_ids(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["preflight", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "checks, in report order: " + ", ".join(checks.CHECK_IDS) in text


def doc_reason_rows() -> dict[str, list[str]]:
    """The docs' reason-code table (header `| code | severity | status | fix | source |`):
    code -> its other cells."""
    lines = DOCS.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| code | severity |"))
    rows: dict[str, list[str]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        m = re.fullmatch(r"`([^`]+)`", cells[0])
        assert m, f"a reason row without a code in backticks: {line[:60]}"
        rows[m[1]] = [c.replace("\\|", "|") for c in cells[1:]]
    return rows


def test_the_docs_list_every_reason_code_with_its_fix_and_source() -> None:
    from builder.judgement.reasons import REASONS

    rows = doc_reason_rows()
    assert list(rows) == list(REASONS)  # every code, in the list's order, none extra
    for code, (severity, status, fix, source) in rows.items():
        reason = REASONS[code]
        assert severity == str(reason.severity), code
        assert status == (reason.status or "-"), code
        assert fix == reason.fix, code
        assert source == str(reason.source), code
