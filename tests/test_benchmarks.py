"""The benchmarks are code too: each module of benchmarks/ imports (a renamed constant in
the toolkit once broke ``make bench`` with no test noticing)."""

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def test_every_benchmark_module_imports():
    modules = sorted(p.stem for p in BENCHMARKS.glob("*.py"))
    assert "run" in modules and "bench_peers" in modules
    code = "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)"
    done = subprocess.run(
        [sys.executable, "-c", code, *modules],
        cwd=BENCHMARKS,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
