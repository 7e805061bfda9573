"""How the text graphs are traced: `graph_function` is `tf.function` without AutoGraph.

The text graphs (the in-graph preprocessor, the served signatures, the Python
`predict` on text) are written in TensorFlow ops: `tf.cond`, `tf.while_loop`,
`tf.map_fn`, with Python `if`/`for` only over Python values. AutoGraph's rewrite of
their source finds nothing to convert, yet it cost a third of an export's time
(benchmarks/bench_export.py). Keras' own export endpoints are traced without it too.
A Python condition on a tensor fails at trace time here, with TensorFlow's message,
instead of being converted.
"""

from __future__ import annotations

import functools

import tensorflow as tf

graph_function = functools.partial(tf.function, autograph=False)
