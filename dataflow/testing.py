"""``dataflow.testing`` is :mod:`dataflow.spark.testing`, under the name users' code imports."""

import sys

from .spark import testing

sys.modules[__name__] = testing
