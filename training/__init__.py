"""albert-tf's training package (`albert_tf.training`): text -> TFRecords -> fit -> checkpoint.

  data/         corpus, split, vocabulary, SOP/NSP pairs, masking, record schema,
                `create-data` and its Apache Beam twin
  pretrain/     tf.data pipeline, dynamic masking, `pretrain`, progress, evaluation
  finetune/     GLUE, SQuAD, RACE and your own files: readers, metrics, `finetune`
  runtime/      distribution strategies and precision, optimizers, TensorBoard
  experiments/  the `demo` and the `ablate` grids: the only room that imports serving

Importing it gives `albert_tf.atomic` TensorFlow's file systems, so atomic writes
reach gs:// and the other remote paths tf.io.gfile knows.
"""

import tensorflow as _tf

from albert_tf import atomic as _atomic

_atomic.register_remote_filesystem(_tf.io.gfile)
