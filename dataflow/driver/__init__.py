"""The Spark driver program of a job that defines ``def run(spark, job)`` (or
``run_batch``): ``sparkmain.py``, the file spark-submit runs (or plain Python, for a
Spark Connect client), which calls the entry point for one chunk, runs a script as a
client, or hands a whole drain to ``sparkdrain`` (the one driver of ``RunJob --all``,
which claims, runs and finishes chunk after chunk with the run path's rules).

May import: run, spark, store, errors.

A program of its own, started by path (``dataflow.run.drain.launch.LAUNCHER``), never
imported by the library or the CLI; it joins the run path to the job side, which
nothing else does.
"""
