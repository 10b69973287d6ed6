#!/usr/bin/env python3
"""The stream (job ``clean_stream``): every order dropped into the landing folder goes
through the daily pipeline's own ``clean`` transformations (tested by ``utility
validate``), and each micro-batch becomes one READY chunk of dataset ``clean``.

Started with ``utility stream ./clean_stream.py``; it runs until stopped (Ctrl-C).
"""

from pathlib import Path

from dataflow import spark as df
from dataflow.pipeline import Pipeline

HERE = Path(__file__).resolve().parent
RAW = "order_id STRING, store STRING, sku STRING, qty STRING, unit_price STRING"
clean = Pipeline.load(HERE.parent / "daily_pipeline" / "pipelines" / "clean")


def said(chunk: df.StreamChunk) -> None:
    where = f"batch {chunk.batch_id} -> chunk {chunk.dataid} of {chunk.datasetid}"
    if chunk.written:
        orders = f"{chunk.rows} clean order{'' if chunk.rows == 1 else 's'}"
        print(f"clean_stream: {where}, {orders}, READY", flush=True)
    else:  # replayed after a crash: the store had it already
        print(f"clean_stream: {where} was already READY: left as it is", flush=True)


query = df.stream(clean, schema=RAW, trigger="1 second", on_chunk=said)
print("clean_stream: watching the landing folder", flush=True)
query.awaitTermination()
