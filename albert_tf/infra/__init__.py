"""albert-tf's infrastructure: what every command shares and the model never imports.

  cli.py          the `albert-tf` command table and its one-line-error wrapper
  arguments.py    the one ArgumentParser, the KEY=VALUE override grammar, numeric ranges
  atomic.py       writes under a hidden temporary name, fsynced and renamed; claims
  exclusive.py    files created only by us, final names taken only when free
  keras_files.py  a model's `.keras` file written whole
  textio.py       the one text decoder (UTF-8, errors name file, line and byte offset)
  lifetime.py     pool workers that end with their parent
  tf_startup.py   TensorFlow's start-up notices held back at its first import

The layers (`albert_tf/*.py`) import none of it; the checkpoint readers and writers,
the tokenizers' file readers, training/ and serving/ do. Importing this package
imports none of its modules.
"""
