"""Where the tests find the repository and the reference fixtures (one home for both)."""

import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
TASK_FIXTURES = os.path.join(FIXTURES, "tasks")
# Real files we did not write (tests/data/real/README.md names each one's source).
REAL = os.path.join(REPO, "tests", "data", "real")
REAL_CHINESE_VOCAB = os.path.join(REAL, "chinese_vocab", "vocab.txt")
