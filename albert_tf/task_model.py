"""`AlbertTaskModel`: what every task model shares, as KerasHub's tasks do.

A task model holds its encoder, its head, and (when it came from a checkpoint with a
vocabulary) a `preprocessor` and the `task_record` it is served by. Its class's
entry in `albert_tf.tasks` (`task_spec`) decides the rest:

* `from_preset(path, **overrides)`: the model from any checkpoint `open_checkpoint` reads
  (`albert_tf.checkpoint.presets`, imported on first use: no checkpoint I/O here);
* it comes compiled: `compile()`'s defaults (AdamW, the task's loss and metrics) are
  applied on construction (`compile=False` skips it), so `fit` works at once;
* a single-output task (classifier, regressor, token classifier, multiple choice)
  returns its array from `call`/`predict`, as KerasHub's tasks do; the others a dict;
* `fit`, `evaluate`, `predict` take raw text (a list of strings, a `(texts_a, texts_b)`
  pair, a batched `tf.data` of them) as well as token-id dicts; a label array is the
  target of the task's `label_output`;
* a `.keras` file carries the preprocessor's vocabulary and the task record as
  assets, so it reloads with the checkpoint directory gone;
* `export(path)` (Keras') needs no call first.
"""

from __future__ import annotations

import logging
import os
import types
from collections.abc import Mapping

import keras
import numpy as np

from albert_tf import api_inputs, tasks
from albert_tf.api_inputs import strict_bool
from albert_tf.config import AlbertConfig
from albert_tf.encoder import AlbertEncoder, ExportMixin, as_config, input_specs
from albert_tf.errors import UserError
from albert_tf.inputs import INPUT_NAMES
from albert_tf.lengths import TaskSequenceLength

__all__ = ["AlbertTaskModel", "default_optimizer", "LOSSES", "METRICS",
           "FINETUNE_LEARNING_RATE", "FINETUNE_WEIGHT_DECAY"]

logger = logging.getLogger(__name__)

# compile()'s default optimizer: AdamW at BERT's usual fine-tuning rate, with the
# original's weight decay (LayerNorm and biases excluded) and global clipping. Its
# warmup and decay schedule needs the number of steps: `albert_tf.create_optimizer`.
FINETUNE_LEARNING_RATE = 2e-5
FINETUNE_WEIGHT_DECAY = 0.01
KERAS_BATCH_SIZE = 32  # Keras' own default batch size for arrays
_NO_DECAY = ("gamma", "beta", "bias")

# The loss and metric kinds a task's entry names (`Task.losses`, `Task.metrics`).
LOSSES = {
    "sparse_categorical_crossentropy":
        lambda: keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    "token_crossentropy": lambda: keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, ignore_class=tasks.IGNORED_LABEL),
    "binary_crossentropy": lambda: keras.losses.BinaryCrossentropy(from_logits=True),
    "mean_squared_error": lambda: keras.losses.MeanSquaredError(),
}
METRICS = {
    "accuracy": lambda: keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
    "token_accuracy": lambda: TokenAccuracy(name="accuracy"),
    "mae": lambda: keras.metrics.MeanAbsoluteError(name="mae"),
}


@keras.saving.register_keras_serializable(package="albert_tf")  # a .keras file compiles it
class TokenAccuracy(keras.metrics.SparseCategoricalAccuracy):
    """Accuracy over the positions whose label is not `tasks.IGNORED_LABEL` (a token
    classifier's first pieces of words; the rest carry no label)."""

    def update_state(self, y_true, y_pred, sample_weight=None):
        labelled = keras.ops.cast(keras.ops.not_equal(y_true, tasks.IGNORED_LABEL), "float32")
        if sample_weight is not None:
            labelled = labelled * keras.ops.cast(sample_weight, "float32")
        return super().update_state(keras.ops.maximum(y_true, 0), y_pred, labelled)


def default_optimizer() -> keras.optimizers.Optimizer:
    """compile()'s optimizer when none is given (see FINETUNE_LEARNING_RATE)."""
    optimizer = keras.optimizers.AdamW(FINETUNE_LEARNING_RATE,
                                       weight_decay=FINETUNE_WEIGHT_DECAY, global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_names=list(_NO_DECAY))
    return optimizer


def _text_inputs():
    # Deferred on purpose: raw text goes through the in-graph preprocessor (TensorFlow);
    # token ids need neither, so the models run on any backend.
    from albert_tf.tokenizer import text_inputs

    return text_inputs


def _records():
    """`albert_tf.checkpoint.task_record`: TaskRecord, TASK_FILE (albert_task.json)."""
    from albert_tf.checkpoint import task_record  # deferred: it imports the layers
    return task_record


def _may_be_text(x) -> bool:
    """Whether `x` may be raw text or a tf.data pipeline (`text_inputs` decides); token-id
    dicts and arrays answer False without TensorFlow."""
    if x is None or isinstance(x, dict):
        return False
    if isinstance(x, (str, bytes, list, tuple)) or hasattr(x, "element_spec"):
        return True
    dtype = getattr(x, "dtype", None)
    return getattr(dtype, "kind", None) in ("S", "U", "O") or "string" in str(dtype)


class RecordAssetError(UserError):
    """A `.keras` file's task record that cannot be read or disagrees with its model."""


class AlbertTaskModel(TaskSequenceLength, ExportMixin, keras.Model):
    """The encoder, a head, and the task's shared behaviour (see the module docstring).

    Args:
      config: the `AlbertConfig`.
      encoder: an encoder to reuse (its config must be `config`).
      preprocessor: an `AlbertPreprocessor` for raw text (`from_preset` builds it from
        the checkpoint's vocabulary); None: token ids only.
      seq_length / sequence_length (attributes): the length raw text is packed to, the
        preprocessor's; setting it repacks from the next call (`lengths`).
      remat, branches: the encoder's training and serving options (`AlbertEncoder`).
      compile: compile with the task's defaults once built (`compile()`); False: leave
        it uncompiled.
    """

    task = ""
    task_spec: tasks.Task
    # Whether the model reads the encoder's pooled output; checkpoints of models that
    # do not (Hugging Face's QA, token-classification and masked-LM models) have no pooler.
    uses_pooled_output = True
    # The head layers: attribute -> layer name, declared here once, read by the
    # constructor. `from_preset` takes a head from a checkpoint of another task only
    # under the same attribute and name (the pretrainer's masked-LM head for AlbertMaskedLM).
    head_layers: Mapping[str, str] = types.MappingProxyType({})

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.task:
            cls.task_spec = tasks.TASKS[cls.task]

    def __init__(self, config: AlbertConfig | dict, encoder: AlbertEncoder | None = None,
                 preprocessor=None, remat: bool = False, branches: int = 1, compile: bool = True,
                 **kwargs):
        super().__init__(**kwargs)
        self._compile_on_init = strict_bool("compile", compile)
        self.config = as_config(config)
        if encoder is not None and encoder.config != self.config:
            raise ValueError("the encoder's config differs from the model's config")
        self.encoder = encoder or AlbertEncoder(self.config, remat=remat, branches=branches,
                                                name="encoder", dtype=self.dtype_policy)
        self.preprocessor = preprocessor
        if preprocessor is not None:  # so a .keras file's vocabulary is checked against it
            preprocessor.model_vocab_size = self.config.vocab_size
        self._task_record = None  # a TaskRecord given by from_preset, a .keras file or the user
        self._traced_text = None  # raw text's preprocessing, traced on first use (_text_as_arrays)

    def _built(self) -> None:
        """Marks the model built (each subclass calls it once its heads exist) and
        compiles it with the task's defaults unless constructed with compile=False."""
        self.built = True
        if self._compile_on_init:
            self.compile()

    def _encode(self, inputs, training, pooled_only=False):
        """The encoder's outputs; `pooled_only`: the pooled output alone, the last block
        run for [CLS] only (`AlbertEncoder.call`)."""
        return self.encoder({name: inputs[name] for name in INPUT_NAMES}, training=training,
                            pooled_only=pooled_only)

    # ------------------------------------------------------------ what it knows
    @property
    def task_record(self):
        """The settings it is served by: the checkpoint's (label names, thresholds, ...),
        else the task's defaults with the preprocessor's tokenizer settings."""
        if self._task_record is not None:
            return self._task_record
        fields = {**self.task_spec.record_fields_of(self), "precision": self.dtype_policy.name}
        pre = self.preprocessor
        if pre is not None:
            fields.update(do_lower_case=pre.do_lower_case, keep_accents=pre.keep_accents,
                          tokenizer=pre.kind, tokenize_chinese_chars=pre.tokenize_chinese_chars,
                          split_characters=pre.split_characters, seq_length=pre.seq_length)
        return _records().TaskRecord.create(self.task, **fields)

    @task_record.setter
    def task_record(self, record) -> None:
        if record is not None and record.spec is not self.task_spec:
            raise ValueError(f"a {record.task} record for a {self.task} model")
        self._task_record = record

    def _head_args(self) -> dict:
        """The constructor arguments beyond the config: the task's head arguments."""
        return self.task_spec.record_fields_of(self)

    @classmethod
    def from_preset(cls, path: str | os.PathLike, **overrides):
        """This model from a checkpoint of any format `open_checkpoint` reads.

        The encoder's weights are the checkpoint's; the head's too when the checkpoint
        holds it (same layer, same shapes), else it keeps its random initialisation,
        with a warning. The preprocessor is built from the checkpoint's SentencePiece
        model and tokenizer settings.

        Args:
          path: the checkpoint (directory or TF1 prefix).
          **overrides: the head's arguments (e.g. `num_classes=3`), `seq_length`,
            `spm_model`, `label_names`, `load_weights=False`, or Keras' `dtype` / `name`.

        Example:
            >>> model = AlbertSequenceClassifier.from_preset("albert_base_v2/", num_classes=2)
            >>> model.compile()
            >>> model.fit(["a gripping film", "dull"], [1, 0], epochs=1)
        """
        from albert_tf.checkpoint import presets  # deferred: it imports the layers
        return presets.task_model_from_preset(cls, path, **overrides)

    # ------------------------------------------------------------ (de)serialisation
    def get_config(self):
        config = {"config": self.config.to_dict(), **self._head_args(),
                  **keras.layers.Layer.get_config(self)}
        config.update(self.encoder.options())
        if self.preprocessor is not None:
            config["preprocessor"] = keras.saving.serialize_keras_object(self.preprocessor)
        return config

    @classmethod
    def from_config(cls, config):
        # Keras recompiles a loaded model from its saved compile config, if any.
        config = {**config, "compile": False}
        if config.get("preprocessor") is not None:
            _text_inputs()  # registers AlbertPreprocessor (it imports the preprocessor)
            config["preprocessor"] = keras.saving.deserialize_keras_object(config["preprocessor"])
        return cls(AlbertConfig.from_dict(config.pop("config")), **config)

    def save_assets(self, dir_path: str) -> None:
        """The task record travels in a `.keras` file, as albert_task.json."""
        self.task_record.write(dir_path)

    def load_assets(self, dir_path: str) -> None:
        """Reads the task record a `.keras` file carries, refused (naming the asset, not
        Keras' temporary directory) when it disagrees with the model loaded."""
        records = _records()
        path = os.path.join(dir_path, records.TASK_FILE)
        if not os.path.isfile(path):
            return
        where = f"the .keras file's {records.TASK_FILE}"
        try:
            record = records.TaskRecord.read(path)
        except UserError as e:
            raise RecordAssetError(str(e).replace(path, where)) from None
        for name, value in self.task_spec.model_kwargs(record).items():
            if value is not None and value != getattr(self, name):
                raise RecordAssetError(f"{where} says {name}={value}, the model's head has "
                                       f"{name}={getattr(self, name)}")
        if record.seq_length is not None:
            try:
                self.config.check_sequence_length(record.seq_length, where=where)
            except UserError as e:
                raise RecordAssetError(str(e)) from None
        self.task_record = record

    # ------------------------------------------------------------ compile, fit, predict
    def compile(self, optimizer="auto", loss="auto", loss_weights=None, metrics="auto",
                **kwargs):
        """`keras.Model.compile`; "auto" (the default) picks the task's own: AdamW
        (`default_optimizer`; the original's schedule: `albert_tf.create_optimizer`),
        the task's loss (and loss weights) and metrics, keyed by output."""
        if optimizer == "auto":
            optimizer = default_optimizer()
        spec = self.task_spec
        if spec.single_output:  # one array out: one loss, a list of metrics
            if loss == "auto":
                loss = LOSSES[spec.losses[spec.label_output][0]]()
            if metrics == "auto":
                metrics = [METRICS[kind]() for kind in spec.metrics.get(spec.label_output, ())]
            super().compile(optimizer=optimizer, loss=loss, loss_weights=loss_weights,
                            metrics=metrics or None, **kwargs)
            return
        # Keyed by output (an optional head's may be absent): a symbolic call only if any is.
        outputs = (self._output_names() if "auto" in (loss, metrics)
                   and (spec.losses or spec.metrics) else set())
        if loss == "auto":
            losses = {name: value for name, value in spec.losses.items() if name in outputs}
            loss = {name: LOSSES[kind]() for name, (kind, _) in losses.items()} or None
            if loss_weights is None and loss and len(loss) > 1:
                loss_weights = {name: weight for name, (_, weight) in losses.items()}
        if metrics == "auto":
            metrics = {name: [METRICS[kind]() for kind in kinds]
                       for name, kinds in spec.metrics.items() if name in outputs} or None
        super().compile(optimizer=optimizer, loss=loss, loss_weights=loss_weights,
                        metrics=metrics, **kwargs)

    def compile_from_config(self, config):
        """Recompiles a loaded `.keras` model as it was compiled (compile is overridden,
        so Keras leaves this to the model)."""
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def _output_names(self) -> set[str]:
        """The outputs this model returns (a symbolic call: no computation)."""
        specs = {name: keras.KerasTensor(spec.shape, spec.dtype)
                 for name, spec in input_specs(self.task_spec).items()}
        return set(self.compute_output_spec(specs))

    def _as_model_data(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False):
        """(x, y, sample_weight, batch_size) for Keras: in-memory raw text as token-id arrays,
        a text pipeline mapped through the preprocessor; plain labels keyed by the task's
        output (a single-output task's labels are its one target, unkeyed)."""
        spec, owner = self.task_spec, type(self).__name__
        api_inputs.check_batch_size(batch_size, owner)
        api_inputs.check_text_rows(x, owner)  # an empty batch, a None row: named, not guessed
        api_inputs.check_labels(self, y, rows=api_inputs.row_count(x),
                                choices=api_inputs.choice_count(x))
        text = _text_inputs() if _may_be_text(x) else None
        if text is not None and not hasattr(x, "element_spec"):  # in-memory text: ids
            x = self._text_as_arrays(text, x)
            y, sample_weight = text.label_arrays(y), text.label_arrays(sample_weight)
        elif text is not None:  # a tf.data pipeline
            if text.text_form(x) is None:  # tokenized
                return text.keyed_dataset(x, spec.label_output, spec.single_output), y, \
                    sample_weight, batch_size
            text.check_text_form(self, x)
            if y is not None or sample_weight is not None:
                raise ValueError("a dataset carries its own labels; pass y and sample_weight "
                                 "inside its elements")
            dataset = text.as_dataset(
                self.preprocessor, x,
                label_output=None if spec.single_output else spec.label_output,
                max_qa_length=self._max_qa_length())
            return dataset, None, None, None
        if spec.single_output:
            if isinstance(y, dict) and set(y) == {spec.label_output}:
                y = y[spec.label_output]
        elif y is not None and not isinstance(y, dict) and spec.label_output is not None:
            y = {spec.label_output: y}
        return x, y, sample_weight, batch_size

    def _max_qa_length(self) -> int | None:
        return self.task_record.max_qa_length if self.task_spec.choices else None

    def _text_as_arrays(self, text, x) -> dict:
        """In-memory raw text as token-id arrays, through the preprocessing traced once
        for this model (`text_inputs.TracedText`): later calls run it, not trace it."""
        text.check_text_form(self, x)
        if self._traced_text is None:
            self._traced_text = text.TracedText()
        return text.as_arrays(self._traced_text, self.preprocessor, x,
                              max_qa_length=self._max_qa_length())

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=True, class_weight=None,
            sample_weight=None, **kwargs):
        """`keras.Model.fit`; `x` may be raw text (see the module docstring)."""
        rows, pipeline = batch_size, hasattr(x, "element_spec")
        x, y, sample_weight, batch_size = self._as_model_data(x, y, sample_weight, batch_size,
                                                              shuffle)
        shuffle = shuffle and not pipeline  # a text pipeline shuffles itself
        if isinstance(validation_data, tuple):  # (x, y[, sample_weight])
            vx, vy, vw = (*validation_data, None)[:3]
            vx, vy, vw, _ = self._as_model_data(vx, vy, vw, kwargs.get(
                "validation_batch_size") or rows)
            validation_data = vx if vy is None else (vx, vy) if vw is None else (vx, vy, vw)
        elif validation_data is not None:
            validation_data = self._as_model_data(validation_data)[0]
        return super().fit(x, y, batch_size=batch_size, epochs=epochs, verbose=verbose,
                           callbacks=callbacks, validation_split=validation_split,
                           validation_data=validation_data, shuffle=shuffle,
                           class_weight=class_weight, sample_weight=sample_weight, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None,
                 **kwargs):
        """`keras.Model.evaluate`; `x` may be raw text."""
        x, y, sample_weight, batch_size = self._as_model_data(x, y, sample_weight, batch_size)
        return super().evaluate(x, y, batch_size=batch_size, verbose=verbose,
                                sample_weight=sample_weight, **kwargs)

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """`keras.Model.predict`; `x` may be raw text. In-memory text with no `steps`,
        `callbacks` or progress bar asked for (verbose "auto" or 0) runs batch by batch
        through `predict_on_batch` (Keras' predict function, traced once; no data pipeline
        built per call), so a repeated call costs what the model costs."""
        in_memory_text = _may_be_text(x) and not hasattr(x, "element_spec")
        x, _, _, batch_size = self._as_model_data(x, batch_size=batch_size)
        if in_memory_text and steps is None and not callbacks and verbose in ("auto", 0):
            rows = len(next(iter(x.values())))
            size = batch_size or KERAS_BATCH_SIZE
            parts = [self.predict_on_batch({name: value[start:start + size]
                                            for name, value in x.items()})
                     for start in range(0, rows, size)]
            return keras.tree.map_structure(lambda *p: np.concatenate(p), *parts)
        return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps,
                               callbacks=callbacks)

