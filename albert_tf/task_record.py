"""Kept so that `albert_tf.task_record`, the path release 0.1 documented, still
imports: the task record lives in `albert_tf.checkpoint.task_record`."""

from albert_tf.checkpoint.task_record import *  # noqa: F401,F403
from albert_tf.checkpoint.task_record import __all__  # noqa: F401
