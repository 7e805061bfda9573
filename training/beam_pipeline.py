"""Kept so that `python -m albert_tf.training.beam_pipeline`, the command release 0.1
documented, still runs: the Beam pipeline lives in `albert_tf.training.data.beam`."""

import sys

from .data.beam import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
