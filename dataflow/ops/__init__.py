"""Operator commands over the store: explain, status, lineage, resubmit and hold,
registration and export, purge, and the status board.

May import: run, store, errors, dataids, crypto, policy.
"""
