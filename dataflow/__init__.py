"""OpenDataFlow for Python: run batch ETL jobs over partitioned data, safely.

May import: errors, layout, spark.

The packages, in the direction data flows (``cli → api → ops/run → store``; ``spark`` on its
own beside them):

- ``cli``: the command-line tools, ``RunJob`` and ``utility``; the only place that prints;
- ``api``: what the CLIs do, as a library (``dataflow.api.drain(...)``): results, no prints;
- ``ops``: operator commands (explain, status, lineage, resubmit, registry, purge, board);
- ``run``: claiming and finishing chunks, locks, the job's environment and process;
- ``store``: the store interface and its backends (``store.sqlite``), all the SQL;
- ``spark``: the job side (``from dataflow import spark as df``), pipelines, testing.

``errors``, ``dataids`` and ``crypto`` are shared by all of them, ``layout`` (where a file
dataset's chunks live) and ``landing`` (where its items land, and how they land whole)
by those that need them; ``dataflow.pipeline``
and ``dataflow.testing`` are the public names of ``dataflow.spark.pipeline`` and
``dataflow.spark.testing``.
"""

__version__ = "0.1.0"
