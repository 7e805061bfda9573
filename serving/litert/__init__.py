"""LiteRT (TensorFlow Lite) export: one .tflite file per checkpoint, raw text in.

  spm_model.py   the SentencePiece model the file carries: ALBERT's normalisation
                 composed into SentencePiece's own character map (no TensorFlow)
  text_graph.py  `LiteText`: raw text -> the model's inputs on LiteRT builtins plus
                 tensorflow-text's FastSentencepieceTokenize
  tasks.py       what each task's file serves: `LITE_TASKS`, the one table keyed by the
                 model's `task`, and `REFUSED` (the tasks it cannot serve, with why)
  convert.py     `write_litert`: the converter, the op check and the parity gate
  runtime.py     LiteRT's interpreter with TF-Text's kernels; the ops of a file

docs/on-device.md is the user's page.
"""
