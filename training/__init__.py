"""albert-tf's training package (`albert_tf.training`): text -> TFRecords -> fit -> checkpoint.

  data/         corpus, split, vocabulary, SOP/NSP pairs, masking, record schema,
                `create-data` and its Apache Beam twin
  pretrain/     tf.data pipeline, dynamic masking, `pretrain`, progress, evaluation
  finetune/     GLUE, SQuAD, RACE and your own files: readers, metrics, `finetune`
  runtime/      distribution strategies and precision, optimizers, TensorBoard
  experiments/  the `demo` and the `ablate` grids: the only room that imports serving

Importing the package imports nothing else (no TensorFlow): each command's module
brings what it needs, so `albert-tf COMMAND --help` starts at once.
"""
