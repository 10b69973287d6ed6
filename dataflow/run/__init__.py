"""The run path: what RunJob does between reading a job and reporting its drain, in six
rooms, each a package that imports only the rooms below it (tests/test_layout.py checks
each room's ``May import:`` line and that no two rooms import each other):

- ``process``: one job's process on this host, its command line, output and logs, and
  the OS facts that tell a live run from a dead one (its chunk lock, its token);
- ``lease``: how a run on a shared store (PostgreSQL) holds its lease for every host;
- ``spark``: a ``.py`` job launched through spark-submit or as a Spark Connect client,
  and chunks run in threads of one Spark driver;
- ``listeners``: what hears a drain besides its report: the alerts and OpenLineage;
- ``claim``: the rules of a chunk's life, a job's settings and environment, claiming a
  chunk, recovering dead runs, and whether a run lives;
- ``drain``: running a job's chunks, one or every claimable one, in this process, in
  workers or in one Spark driver, and the launch plan that picks the drain.

May import: store, errors, dataids, crypto, layout, policy.

RunJob imports only this package, the store and the CLI: keep it free of what a run
does not need (benchmarks/findings.md measures every millisecond of start-up). A plain
run on SQLite imports nothing of ``lease``, ``spark``, the alerts or OpenLineage
(``listeners`` imports them where needed): tests/test_startup_imports.py checks it.
"""
