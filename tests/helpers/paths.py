"""Where the tests find the repository and the reference fixtures (one home for both)."""

import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
TASK_FIXTURES = os.path.join(FIXTURES, "tasks")
