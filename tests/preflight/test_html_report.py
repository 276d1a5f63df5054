"""`trainimg preflight --html FILE`: one self-contained page, escaped, rendered by a real
browser (Debian's headless Chromium): the counts and tables are there, the script filters,
and nothing but the page itself is loaded."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from PIL import Image

from builder.cli import main
from builder.preflight.html_report import render_html
from builder.preflight.report import HostReport
from tests.preflight.conftest import PREFLIGHT_MATRIX, TODAY, RunFixture

HOSTILE = '<script>alert(1)</script>"\x1b[2J'
RED, GREEN = (0xC6, 0x28, 0x28), (0x2E, 0x7D, 0x32)  # the block and ok badges


@pytest.fixture
def fleet(run_fixture: RunFixture) -> list[HostReport]:
    """Five hosts: two that block for the same reason, one healthy, two more recorded."""
    reports = [run_fixture(n, "580.65.06")[0] for n in ("el9-h100", "el9-geforce", "el9-v100-r535")]
    healthy = replace(reports[0], host="el9-healthy",
                      checks=[c for c in reports[0].checks if c.severity.rank <= 1])  # fmt: skip
    hostile = replace(reports[2], host=HOSTILE)  # a record can name its host anything
    return [healthy, *reports, hostile]


def test_the_page_escapes_every_host_string_and_loads_nothing(fleet: list[HostReport]) -> None:
    page = render_html(fleet, "580.65.06")
    assert page.count("<script>") == 1  # the page's own; the host's is text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&quot;\\x1b[2J" in page
    assert "\x1b" not in page
    assert "default-src 'none'" in page  # the browser refuses any load
    assert not re.search(r"\b(src|href)=|https?://|@import|url\(", page)
    assert "innerHTML" not in page and "document.write" not in page
    block = sum(1 for r in fleet if str(r.verdict) == "block")
    assert f'data-count="block">{block} block<' in page
    assert page.count('<tr data-verdict="') == len(fleet)


def test_html_needs_an_existing_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no" / "such" / "r.html"
    code = main(["preflight", "--from", str(tmp_path), "--html", str(missing)])
    _, err = capsys.readouterr()
    assert code == 2 and f"--html {missing}: no directory {missing.parent}" in err
    assert "Traceback" not in err and not missing.parent.exists()
    code = main(["preflight", "--from", str(tmp_path), "--html", str(tmp_path)])
    assert code == 2 and "is a directory" in capsys.readouterr()[1]


def test_the_cli_writes_the_page_beside_its_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixtures = Path(__file__).parent / "fixtures"
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for name in ("el9-h100", "el9-v100-r535", "el9-geforce"):
        shutil.copytree(fixtures / name, fleet / name)
    page = tmp_path / "report.html"
    code = main(["preflight", "--matrix", str(PREFLIGHT_MATRIX), "--today", str(TODAY), "--from",
                 str(fleet), "--target-driver", "580.65.06", "--html", str(page)])  # fmt: skip
    out, _ = capsys.readouterr()
    count_line = out.splitlines()[-1]  # the text report's last line is its count line
    assert count_line.startswith("3 host(s): ")
    text = page.read_text()
    assert f'<p id="count-line">{html.escape(count_line)}</p>' in text  # the same line
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp left
    assert code in (1, 3, 4)


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.fail("chromium is not installed: scripts/setup.sh installs Debian's chromium")
    profile = tmp_path / "profile"  # its own profile: nothing of this machine's is read or kept
    return subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-extensions", "--disable-background-networking", f"--user-data-dir={profile}",
         "--window-size=1280,1000", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.integration  # a browser: three Chromium starts
def test_a_browser_renders_the_counts_and_filters_the_hosts(
    fleet: list[HostReport], tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(fleet, "580.65.06"))
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert f"shown {len(fleet)} of {len(fleet)} hosts" in dom.stdout  # the script ran
    assert "580.65.06" in dom.stdout and "<script>alert" not in dom.stdout
    # a filtered link: only the hosts whose row mentions the text are shown
    top = fleet[3].top
    assert top is not None
    matching = [r for r in fleet if r.top is not None and r.top.code == top.code]
    dom = _chromium(tmp_path, "--dump-dom", f"{page.as_uri()}#q={top.code}")
    assert f"shown {len(matching)} of {len(fleet)} hosts" in dom.stdout, dom.stdout[-3000:]
    # the screenshot: the page is drawn with its styles (the red block and green ok badges)
    shot = tmp_path / "shot.png"
    done = _chromium(tmp_path, f"--screenshot={shot}", page.as_uri())
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    with Image.open(shot) as img:
        colors = {c for _, c in img.convert("RGB").getcolors(maxcolors=1 << 20) or []}
    assert RED in colors and GREEN in colors
