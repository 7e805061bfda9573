"""albert-tf's serving package. Importing it imports albert_tf.training, which gives
albert_tf.runio TensorFlow's file systems (gs:// and the other remote paths)."""

from albert_tf import training as _training  # noqa: F401  (registers tf.io.gfile)
