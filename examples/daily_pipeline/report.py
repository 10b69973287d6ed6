#!/usr/bin/env python3
"""Print the stored daily totals of every day (a tool, run with python, not RunJob)."""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dataflow.spark import read_all, registered

builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
spark = builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
totals = read_all(spark, registered("daily_totals"))  # every chunk, with its dataid
per_day = totals.groupBy("dataid").agg(
    F.sum("orders").alias("orders"),
    F.sum("units").alias("units"),
    F.sum("revenue").alias("revenue"),
)
print("day         orders  units   revenue")
for row in per_day.orderBy("dataid").collect():
    print(f"{row.dataid}  {row.orders:>6} {row.units:>6} {row.revenue:>9}")
