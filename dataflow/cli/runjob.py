"""``RunJob ./loadbob.sh [args...]``: claim the job's next chunk, run the script on it,
record READY or FAILED."""

from __future__ import annotations

import argparse
import os
import sys

from .. import crypto, jobenv, lifecycle, runner, sparksubmit
from ..lifecycle import FAILED, READY
from ..store import Store, locate
from . import guarded, say, stamp

USAGE = """\
RunJob [--db PATH] SCRIPT [ARGS...]

Infers the job from SCRIPT's name (./loadbob.sh -> loadbob), claims the smallest
chunk whose inputs are all READY and that the job has not produced, runs SCRIPT
with the chunk's environment, and records READY (exit 0) or FAILED.
A .py SCRIPT runs through spark-submit. Passwords are decrypted with the passkey
from PASSKEY or PASSKEY_FILE (or, as in the seed, a passkey as first argument).
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="RunJob", usage=USAGE, add_help=True)
    parser.add_argument("--db", help="the store (default: $DATAFLOW_DB, else ./dataflow.db)")
    parser.add_argument("script", help=argparse.SUPPRESS)
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def _seed_passkey(options: argparse.Namespace) -> str | None:
    """The seed's ``RunJob PASSKEY ./job.sh`` form, recognised only when no passkey is
    configured and the first word is not a script while the second one is."""
    if crypto.read_passkey() is not None or not options.args:
        return None
    if os.path.exists(options.script) or not os.path.exists(options.args[0]):
        return None
    passkey = options.script
    options.script, options.args = options.args[0], options.args[1:]
    return passkey


def run(options: argparse.Namespace) -> int:
    passkey = _seed_passkey(options) or crypto.read_passkey()
    script = options.script
    jobid = runner.job_name(script)
    path = runner.resolve(script)
    with Store.open(locate(options.db)) as store:
        job = lifecycle.load_job(store, jobid)
        env = jobenv.build(job, store.datasets(job.inputs + job.outputs), passkey)
        argv = sparksubmit.job_argv(path, options.args, job.settings)  # .py: spark-submit
        dataid = lifecycle.claim(store, job)
        if dataid is None:
            say(f"{stamp()}: no suitable data available for job. Not running it")
            return 0
        say(f"{stamp()}: Launching {script} with dataid {dataid}")
        outcome = runner.Outcome(1)
        try:
            outcome = runner.run(argv, runner.child_environment(env.for_chunk(dataid)))
        finally:
            status = READY if outcome.ok else FAILED
            verb = "is complete" if outcome.ok else "has failed"
            say(f"{stamp()}: Job {script} {verb}. Updating status")
            updated, released = lifecycle.finish(store, jobid, dataid, status)
            say(
                f"{updated} rows updated to {status} for {jobid} and {dataid} "
                f"{released} IN file-local locks released"
            )
        return outcome.exit_code


def main(argv: list[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    return guarded(lambda: run(options))


if __name__ == "__main__":
    sys.exit(main())
