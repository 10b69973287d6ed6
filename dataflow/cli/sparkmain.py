"""The program spark-submit runs for a job that defines ``def run(spark, job)``:

    spark-submit ... sparkmain.py chunk ./job.py [ARGS...]     one chunk (RunJob ./job.py)
    spark-submit ... sparkmain.py drain OPTIONS -- ./job.py [ARGS...]
                                                  every chunk (RunJob --all ./job.py)

spark-submit runs it as a file, not as a module of the package: it imports only
absolute names, after taking its own folder off ``sys.path``.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    if argv[:1] == ["chunk"] and len(argv) >= 2:
        from dataflow.spark.engine import run_one

        run_one(argv[1], argv[2:])
        return 0
    if argv[:1] == ["drain"]:
        from dataflow.cli.sparkdrain import main as drain

        return drain(argv[1:])
    print("usage: sparkmain.py chunk SCRIPT [ARGS...] | drain OPTIONS -- SCRIPT", file=sys.stderr)
    return 2


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))  # its modules are not top-level ones
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    sys.exit(main(sys.argv[1:]))
