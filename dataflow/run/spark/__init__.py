"""Spark launching: a ``.py`` job's command line through spark-submit (``sparksubmit``) or
as a thin Spark Connect client (``sparkconnect``), its application followed on a cluster
(``sparkcluster`` parses what spark-submit says, ``sparkrun`` runs it as a job), and
chunks run inside one Spark driver's process: one a thread (``inprocess``) or many in one
call of the job's ``run_batch`` (``inbatch``). Imported only for a ``.py`` job or a Spark
setting to check: a plain script's RunJob imports nothing of it.

May import: run.process, errors, policy.
"""
