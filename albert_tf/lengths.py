"""The packed length's two names, and a preprocessor's settings that cannot be mistyped.

`seq_length` is ours (the original scripts' `--max_seq_length`, our task record's field);
`sequence_length` is KerasHub's, the name its users write. Both read and set the same
length, checked by the one length rule (`config.check_sequence_length`):

* `PreprocessorSettings`, for `AlbertPreprocessor`: `seq_length` packs every row to that
  length from the next call on; setting a public attribute the preprocessor does not
  have is an AttributeError naming it, not a new attribute that changes nothing;
* `TaskSequenceLength`, for the task models: the preprocessor's length, checked against
  the model's position table, and the task record's `seq_length` with it.

No TensorFlow, no Keras.
"""

from __future__ import annotations

from albert_tf.config import check_sequence_length

__all__ = ["PreprocessorSettings", "TaskSequenceLength"]

# Public names Keras itself sets on a built layer: its TensorFlow backend's
# `TFLayer._trackable_children` (keras/src/backend/tensorflow/layer.py) clears and
# restores them around a SavedModel save.
KERAS_SETS = frozenset({"train_function", "test_function", "predict_function"})


class _SequenceLengthAlias:
    """`sequence_length` (KerasHub's name) is `seq_length`, read and set."""

    @property
    def sequence_length(self) -> int:
        return self.seq_length

    @sequence_length.setter
    def sequence_length(self, value: int) -> None:
        self.seq_length = value


class PreprocessorSettings(_SequenceLengthAlias):
    """`seq_length` checked when set, and no public attribute set that the preprocessor
    lacks once constructed (`_close_settings`)."""

    @property
    def seq_length(self) -> int:
        """Length of every packed row (>= 3, `config.check_sequence_length`)."""
        return self._seq_length

    @seq_length.setter
    def seq_length(self, value: int) -> None:
        self._seq_length = check_sequence_length(value, where=f"{type(self).__name__}.seq_length")

    def _close_settings(self) -> None:
        """From now on a public attribute that is not one already is refused."""
        self._settings_closed = True

    def __setattr__(self, name: str, value) -> None:
        if (not name.startswith("_") and self.__dict__.get("_settings_closed")
                and name not in self.__dict__ and not hasattr(type(self), name)
                and name not in KERAS_SETS):
            raise AttributeError(f"{type(self).__name__} has no setting {name!r} (set "
                                 "seq_length or sequence_length, or build a new one)")
        super().__setattr__(name, value)


class TaskSequenceLength(_SequenceLengthAlias):
    """A task model's `seq_length`: its preprocessor's (None without one)."""

    @property
    def seq_length(self) -> int | None:
        return None if self.preprocessor is None else self.preprocessor.seq_length

    @seq_length.setter
    def seq_length(self, value: int) -> None:
        owner = type(self).__name__
        if self.preprocessor is None:
            raise ValueError(f"{owner} has no preprocessor: seq_length is the length raw text "
                             "is packed to")
        value = self.config.check_sequence_length(value, where=f"{owner}.seq_length")
        self.preprocessor.seq_length = value
        if self._task_record is not None:  # export and predict read the record's
            self._task_record = self._task_record.replace(seq_length=value)
