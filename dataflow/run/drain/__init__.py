"""Drains: running a job's chunks, one (a plain ``RunJob``) or every claimable one
(``--all``), claiming, starting and recording them (``drain``, ``drainclaim``,
``recorder``), in the foreground of this process (``foreground``); spread over worker
processes (``workers`` in RunJob, ``worker`` each of them) or run by one Spark driver
(``driven``), both telling RunJob what happens as events (``events``); the face every
drain shows the process that runs it (``face``: :class:`~.face.Draining`, for readers and
type checkers); and the launch plan (``launch``) that picks the command and the drain
for a script.

May import: run.claim, run.process, run.spark, store, errors, layout.
"""
