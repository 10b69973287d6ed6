"""One job's process on this host: what a job script is (``scripts``), the child started,
watched and ended (``runner``, ``watcher``, ``suspend`` for a terminal's ^Z), its output
copied to the console and its log (``output``, ``logs``, ``storedlogs`` for the log kept
in the store), and the two facts by which this host tells a live run from a dead one:
the run's chunk lock (``locks``) and the processes carrying its token (``processes``).
Nothing here knows of claims or of the rules; the rooms above build on it.

May import: store, errors, dataids.
"""
