"""The HTTP server of ``utility serve`` (the optional extra ``opendataflow[serve]``:
Starlette on uvicorn): items POSTed to ``/stream/<dataset>`` land in the dataset's
landing folder as ``utility drop`` lands a file, and read-only views of the store (the
live status board, status, runs, history, logs) answer in the CLI's own JSON; the live
board acts (resubmit, hold, release, recover) for a write token.

``items`` (a request body as items, and items as a file of the landing's format),
``intake`` (where and under which name a request's items land, only under a landing
root), ``access`` (the bearer tokens, read and write; the rate limit), ``views`` (the read-only
answers), ``metrics`` (``/metrics`` for Prometheus, read from the store
at each scrape), ``runhistory`` (the ended runs ``/metrics`` has counted, kept between
scrapes), ``actions`` (the board's actions: who may act, and how), ``app`` (the routes), ``connections`` (how many at once, how long a request
may take to arrive), ``server`` (the socket, uvicorn, SIGTERM). Only ``utility serve`` imports this package,
inside its function: no other command pays for, or needs, Starlette.

May import: ops, run, store, errors, dataids, crypto, policy, landing.

Nothing of the Spark package: a landing's folder and its durable write are
``dataflow.landing``'s, read from the dataset's row (never its password).
"""
