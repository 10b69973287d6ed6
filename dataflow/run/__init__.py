"""The run path: claiming and finishing chunks (the rules), chunk locks, the job's
environment, the child process, spark-submit's command line (or a Spark Connect
client's, ``sparkconnect``), drains and run logs; chunks run in threads of one Spark
driver or Connect client (``inprocess``, ``driven``), or many chunks per call of the
job's ``run_batch`` (``inbatch``: a failed batch split down to the chunks that fail alone).

May import: store, errors, dataids, crypto, layout, policy.

RunJob imports only this package, the store and the CLI: keep it free of what a run
does not need (benchmarks/findings.md measures every millisecond of start-up). A plain
run on SQLite imports nothing of the lease (``keeper``, ``holder``), Spark (``spark*``),
the alerts or OpenLineage (``listeners`` imports them where needed):
tests/test_startup_imports.py checks it.
"""
