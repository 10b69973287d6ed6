"""``docs/cli.md``, written from the parsers themselves: ``python -m dataflow.cli.reference
> docs/cli.md`` (tests/test_docs.py checks that the page is current)."""

from __future__ import annotations

import os
import sys

from . import runjob, utility

WIDTH = "88"  # argparse wraps help at $COLUMNS: the same page on every terminal


def page() -> str:
    os.environ["COLUMNS"] = WIDTH
    top = utility.parser()
    (sub,) = [a for a in top._actions if a.dest == "command"]  # the subcommands
    out = [
        "# Command reference",
        "",
        "Generated from the commands' own parsers by `python -m dataflow.cli.reference > "
        "docs/cli.md`; `--help` prints the same. The same operations from Python, "
        "without a subprocess: [api.md](api.md).",
        "",
        "## RunJob",
        "",
        "```text",
        runjob._parser().format_help().rstrip(),
        "```",
        "",
        "## utility",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for name, parser in sub.choices.items():
        summary = (parser.description or "").replace("|", "\\|")
        out.append(f"| [`{name}`](#utility-{name}) | {summary} |")
    for name, parser in sub.choices.items():
        out += ["", f"### utility {name}", "", "```text", parser.format_help().rstrip(), "```"]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(page())
