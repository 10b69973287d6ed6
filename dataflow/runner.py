"""The job's process: what to execute for a script, and running it to its end.

The runner knows nothing of SQL or chunks; it gets an argv and an environment.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import ScriptError

# never handed to the job: it receives decrypted passwords, not the key to all of them
WITHHELD = ("PASSKEY",)


def job_name(script: str) -> str:
    """The jobid of a script: its file name without folder and extension."""
    name = Path(script).name
    stem, dot, _ = name.rpartition(".")
    return stem if dot and stem else name


def resolve(script: str) -> str:
    """The path to execute for ``script``; a clear error if it cannot run."""
    path = script
    if "/" not in script:
        path = f"./{script}" if os.path.exists(script) else shutil.which(script) or script
    if not os.path.exists(path):
        raise ScriptError(script, "no such file")
    if os.path.isdir(path):
        raise ScriptError(script, "it is a folder")
    if not os.access(path, os.X_OK):
        raise ScriptError(script, f"it is not executable (chmod +x {script})")
    return path


def child_environment(job_variables: dict[str, str]) -> dict[str, str]:
    """The inherited environment, less the passkey, plus the job's variables."""
    env = {k: v for k, v in os.environ.items() if k not in WITHHELD}
    env.update(job_variables)
    return env


@dataclass(frozen=True)
class Outcome:
    """How the job's process ended."""

    returncode: int  # negative: killed by that signal, as subprocess reports it

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def exit_code(self) -> int:
        """What RunJob exits with: the job's own code, or 128+n for signal n."""
        return 128 - self.returncode if self.returncode < 0 else self.returncode


def _start(argv: list[str], env: dict[str, str]) -> subprocess.Popen:
    try:
        return subprocess.Popen(argv, env=env)
    except OSError as exc:
        if exc.errno != errno.ENOEXEC:
            raise ScriptError(argv[0], exc.strerror or str(exc)) from None
    # A script without a "#!" line: run it with bash, as bash itself (and the seed) would.
    return _start([shutil.which("bash") or "/bin/sh", *argv], env)


def run(argv: list[str], env: dict[str, str]) -> Outcome:
    """Run the job with our stdout and stderr, and wait for it."""
    process = _start(argv, env)
    try:
        return Outcome(process.wait())
    except KeyboardInterrupt:
        # Ctrl-C reached the job too (same process group): let it end, then report.
        return Outcome(process.wait())
