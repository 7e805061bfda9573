"""albert-tf's serving package (`albert_tf.serving`): checkpoint -> SavedModel -> answers.

  export.py, layout.py, warmup.py  `albert-tf export`: BASE/NAME/VERSION/ for TF Serving
  server_releases.py               which tensorflow/serving release links an export's ops
  serving_check.py, check_command.py  `albert-tf serving-check`: load in a release's TensorFlow
  requests.py                      TF Serving's Predict messages (REST and gRPC forms)
  signatures/                      one serving module per task, raw text in
  litert/                          `export --format litert`: one .tflite file, raw text in
  client/                          `albert-tf predict` (REST, gRPC, local SavedModel)

It never imports `albert_tf.training`. Importing the package imports nothing else
(no TensorFlow): each module brings what it needs.
"""
