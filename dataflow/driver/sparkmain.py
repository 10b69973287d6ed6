"""The program spark-submit runs for a job that defines ``def run(spark, job)``:

    spark-submit ... sparkmain.py chunk ./job.py [ARGS...]     one chunk (RunJob ./job.py)
    spark-submit ... sparkmain.py drain OPTIONS -- ./job.py [ARGS...]
                                                  every chunk (RunJob --all ./job.py)

and, started by plain Python, of a job run as a Spark Connect client (``$SPARK_REMOTE``):
the same ``chunk`` and ``drain``, and ``client ./job.py [ARGS...]`` for a script without
the entry point, run as ``python ./job.py`` would run it. A Spark Connect client that
gets SIGTERM, SIGINT or SIGHUP interrupts its operations on the server before it ends.

spark-submit runs it as a file, not as a module of the package: it imports only
absolute names, after taking its own folder off ``sys.path``.
"""

from __future__ import annotations

import os
import signal
import sys

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def main(argv: list[str]) -> int:
    if argv[:1] in (["chunk"], ["client"]) and len(argv) >= 2:
        from dataflow.spark.engine import is_remote, run_one, run_script

        if is_remote():
            for number in SIGNALS:
                signal.signal(number, _interrupted)
        if argv[0] == "chunk":
            run_one(argv[1], argv[2:])
            return 0
        try:
            run_script(argv[1], argv[2:])
        except Exception as exc:  # as `python job.py` says it: from the job's own code on
            _print_job_traceback(exc, os.path.abspath(argv[1]))
            return 1
        return 0
    if argv[:1] == ["drain"]:
        from dataflow.driver.sparkdrain import main as drain

        return drain(argv[1:])
    print(
        "usage: sparkmain.py chunk|client SCRIPT [ARGS...] | drain OPTIONS -- SCRIPT",
        file=sys.stderr,
    )
    return 2


def _print_job_traceback(exc: BaseException, script: str) -> None:
    """The traceback from the script's first frame (this launcher's and runpy's left out)."""
    import traceback

    tb = exc.__traceback__
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != script:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb or exc.__traceback__)


def _interrupted(number: int, _frame) -> None:
    """Stop what this client runs on the server, then end as the signal would have."""
    from dataflow.spark.engine import interrupt_all

    try:
        interrupt_all()
    except Exception as exc:  # a server that is gone has nothing left to stop
        print(f"could not interrupt the server's operations: {exc}", file=sys.stderr)
    signal.signal(number, signal.SIG_DFL)
    os.kill(os.getpid(), number)


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))  # its modules are not top-level ones
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    sys.exit(main(sys.argv[1:]))
