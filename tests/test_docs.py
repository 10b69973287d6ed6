"""The documentation says what the code does: the command reference is generated from the
parsers and current, and every relative link of the README and docs/ leads somewhere."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def test_the_command_reference_is_current():
    made = subprocess.run(
        [sys.executable, "-m", "dataflow.cli.reference"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "### utility copy-store" in made and "## RunJob" in made
    assert (ROOT / "docs" / "cli.md").read_text() == made, (
        "docs/cli.md is stale: python -m dataflow.cli.reference > docs/cli.md"
    )


def test_every_relative_link_leads_to_a_file():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = [
        f"{page.relative_to(ROOT)}: {target}"
        for page in pages
        for target, _ in LINK.findall(page.read_text())
        if "://" not in target and not (page.parent / target).exists()
    ]
    assert broken == []
