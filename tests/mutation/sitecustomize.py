"""Lets `make mutation` see what the CLIs' own processes call (docs/development.md).

mutmut 3 learns which tests reach which function by counting, in pytest's process, the
calls of its trampolines; RunJob's claim, finish and liveness run in a subprocess, whose
calls it would never see, and whose trampolines would look for mutmut's configuration in
the test's tmp_path and crash. On ``PYTHONPATH`` only during a mutation run: a process
started while mutmut gathers its stats writes each function it reaches to a file in
``$MUTMUT_HITS``, which ``mutation_hits`` credits to the test that is running.
"""

import os

if os.environ.get("MUTANT_UNDER_TEST") == "stats" and os.environ.get("MUTMUT_HITS"):
    from pathlib import Path

    from mutmut.mutation import trampoline

    _seen: set[str] = set()
    _file = Path(os.environ["MUTMUT_HITS"]) / f"{os.getpid()}.hits"

    def _record(name: str, caller: str | None = None) -> None:
        if name not in _seen:
            _seen.add(name)
            with _file.open("a") as out:  # at once: a process may be killed (-9) any time
                out.write(name + "\n")

    trampoline.record_trampoline_hit = _record
