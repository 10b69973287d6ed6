"""OpenDataFlow for Python: run batch ETL jobs over partitioned data, safely.

The library never prints and never exits; the command-line tools live in
:mod:`dataflow.cli`.
"""

__version__ = "0.1.0"
