"""Run by the peers' own Python (never imported by the toolkit): CHUNKS Luigi tasks, one
per chunk, each writing its own output file (Luigi's "done" is an existing target), on
the local scheduler with one worker. MODE ``subprocess`` runs ``true`` in each task, as
RunJob runs ``./noop.sh``; ``inprocess`` does nothing in Python. Prints the seconds of
``luigi.build`` as JSON.

    python luigi_noop.py FOLDER CHUNKS MODE
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import luigi

FOLDER, CHUNKS, MODE = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]


class Chunk(luigi.Task):
    dataid = luigi.IntParameter()

    def output(self):
        return luigi.LocalTarget(str(FOLDER / f"dataid={self.dataid}"))

    def run(self):
        if MODE == "subprocess":
            subprocess.run(["true"], check=True)
        with self.output().open("w") as out:
            out.write("")


class All(luigi.WrapperTask):
    def requires(self):
        return [Chunk(dataid=d) for d in range(CHUNKS)]


if __name__ == "__main__":
    start = time.perf_counter()
    ok = luigi.build([All()], local_scheduler=True, workers=1, log_level="WARNING")
    seconds = time.perf_counter() - start
    done = sum(1 for _ in FOLDER.glob("dataid=*"))
    print(json.dumps({"seconds": seconds, "done": done, "ok": ok}))
