"""The claim and its rules: which chunk a job may claim and how a run ends
(``lifecycle``), a job's settings (``settings``) and the environment it receives
(``jobenv``, ``envnames``), taking a claim in one short transaction (``claims``),
recovering dead runs (``recovery``), patience with a store that fails in a way that
passes (``patience``), and whether a chunk's run lives (``liveness``: its chunk lock and
token on this host, and on a shared store its lease, imported from ``lease`` only there).
Every rule the store's writers must keep is here, in Python.

May import: run.process, run.lease, run.spark, run.listeners, store, errors, dataids, crypto, layout, policy.
"""
