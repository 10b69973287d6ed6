"""The lease of a run on a shared store (PostgreSQL), which other hosts see: the store's
run lock on its chunk and the run's heartbeat, held for every run of a host by one lease
holder process. ``keeper`` is a RunJob's side (it asks the holder to hold, watch and let
go); ``holder`` is the holder's logic, ``holderprocess`` the process that runs it (``python
-m dataflow.run.lease.holderprocess``) and ``holdersocket`` where a host's holder is found
and how the first RunJob that needs one starts it. Only a lease's liveness
(``claim.liveness``) imports this room, inside its functions: a run on SQLite, whose
chunk lock is its whole liveness, imports nothing of it.

May import: run.process, store, errors.
"""
