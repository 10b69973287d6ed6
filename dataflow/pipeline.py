"""``dataflow.pipeline`` is :mod:`dataflow.spark.pipeline`, under the name users' code imports."""

import sys

from .spark import pipeline

sys.modules[__name__] = pipeline
