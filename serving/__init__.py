"""albert-tf's serving package. Importing it gives albert_tf.runio TensorFlow's file
systems, so atomic writes reach gs:// and the other remote paths tf.io.gfile knows."""

import tensorflow as _tf

from albert_tf import runio as _runio

_runio.register_remote_filesystem(_tf.io.gfile)
