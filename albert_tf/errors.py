"""The error types of albert-tf: what the user can fix, reported as one line.

Every module's error class derives from `UserError` (ConfigError, CheckpointError,
DataError, VocabError, ...); `albert_tf.infra.cli.command` turns one into
`albert-tf COMMAND: message` on stderr and its `exit_status`. No TensorFlow, no Keras.
"""

from __future__ import annotations

import unicodedata

# The most characters of the user's text (a name, a token, a value) a message echoes.
SHOWN_CHARS = 80


class UserError(ValueError):
    """Bad input the user can fix: reported as one line naming what and where, exit 2.

    A ValueError so that library callers catching ValueError keep working.
    `exit_status` is the command's exit status (2; a subclass for trouble that is
    not the input's, such as an unreachable server, uses 1).
    """

    exit_status = 2


class UsageError(UserError):
    """A bad command line (unknown option, missing argument, malformed value)."""



def shown(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text` as a message echoes it: at most `limit` characters, control characters
    escaped (one line), the full length said when cut."""
    if len(text) <= limit and all(unicodedata.category(c)[0] != "C" for c in text):
        return text
    rest = f"... ({len(text):,} characters)" if len(text) > limit else ""
    return repr(text[:limit])[1:-1] + rest
