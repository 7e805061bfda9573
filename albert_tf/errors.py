"""The error types of albert-tf: what the user can fix, reported as one line.

Every module's error class derives from `UserError` (ConfigError, CheckpointError,
DataError, VocabError, ...); `albert_tf.infra.cli.command` turns one into
`albert-tf COMMAND: message` on stderr and its `exit_status`. No TensorFlow, no Keras.
"""

from __future__ import annotations


class UserError(ValueError):
    """Bad input the user can fix: reported as one line naming what and where, exit 2.

    A ValueError so that library callers catching ValueError keep working.
    `exit_status` is the command's exit status (2; a subclass for trouble that is
    not the input's, such as an unreachable server, uses 1).
    """

    exit_status = 2


class UsageError(UserError):
    """A bad command line (unknown option, missing argument, malformed value)."""

