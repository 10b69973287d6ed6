"""``utility validate PATH``: run the examples declared on every transformation of a
pipeline (or of every pipeline below PATH) and report per transformation."""

from __future__ import annotations

import argparse
import json
import os

from ..run.spark import sparksubmit
from ..spark import pipeline, testing
from . import say, say_lines
from .commands import command

SUMMARY = "run the transformation examples of a pipeline folder and report each"


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="a pipeline.json, its folder, or a folder of pipelines")
    parser.add_argument(
        "--require-tests",
        action="store_true",
        help="count a transformation without examples as a failure",
    )


@command("validate", SUMMARY, _arguments)
def run(options: argparse.Namespace) -> int:
    pipelines = pipeline.discover(options.path)  # a bad declaration stops us before Spark
    sparksubmit.find_java("utility validate", os.environ)
    spark = testing.session()
    reports = []
    for declared in pipelines:
        found = testing.validate(declared, spark)
        reports.extend(found)
        if not options.json:
            say(f"pipeline {declared.name} ({declared.source})")
            for line in _lines(found):
                say(line)
    counts = {s: sum(r.status == s for r in reports) for s in ("ok", "failed", "untested")}
    if options.json:
        say_lines(json.dumps([_record(r) for r in reports], indent=2))
    else:
        say(
            f"{len(reports)} transformations: {counts['ok']} ok, {counts['failed']} failed, "
            f"{counts['untested']} untested"
        )
    failed = counts["failed"] or (options.require_tests and counts["untested"])
    return 1 if failed else 0


def _lines(reports: list[testing.StepReport]) -> list[str]:
    width = max(len(r.name) for r in reports)
    lines = []
    for report in reports:
        if report.status == "untested":
            detail = "no examples declared"
        elif report.failures:
            detail = f"{len(report.failures)} of {report.examples} examples failed"
        else:
            detail = f"{report.examples} example{'s' if report.examples > 1 else ''}"
        lines.append(f"  {report.status.upper():<9} {report.name:<{width}}  {detail}")
        for failure in report.failures:
            lines.extend("      " + line for line in failure.splitlines())
    return lines


def _record(report: testing.StepReport) -> dict[str, object]:
    return {
        "pipeline": report.pipeline,
        "transformation": report.name,
        "status": report.status,
        "examples": report.examples,
        "failures": list(report.failures),
    }
