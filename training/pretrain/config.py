"""The configuration of `albert-tf pretrain`: `PretrainConfig` and how it is assembled.

Defaults <- an optional JSON file <- the CLI options <- `key=value` overrides, in
that order (`load_config`); every value is checked against the field's type and
`PretrainConfig.validate` checks the ranges before any data is read.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

from albert_tf import AlbertConfig, precisions
from albert_tf.config import check_sequence_length
from albert_tf.errors import UserError
from albert_tf.infra import arguments, textio
from albert_tf.infra.arguments import number_field

from ..runtime.fit_steps import check_accumulation

DATA_RESUME = ("skip", "reseed")


@dataclasses.dataclass
class PretrainConfig:
    """Everything a pretraining run needs; defaults are the original ALBERT recipe."""

    model: str = "albert-base"        # preset name or albert_config.json path
    albert: dict = dataclasses.field(default_factory=dict)  # AlbertConfig overrides
    train_data: str = ""              # TFRecord glob(s) from `albert-tf create-data`
    eval_data: str = ""               # held-out TFRecord glob(s); empty: no eval
    output_dir: str = ""
    spm_model: str = ""               # copied into model/ as spiece.model (vocab.txt: as vocab.txt)
    init_checkpoint: str = ""         # anything albert_tf.load_checkpoint reads
    # Numbers: ranges beside the defaults, checked by `arguments.check_numbers` (validate);
    # seq_length by the length rule (config.check_sequence_length).
    seq_length: int | None = None       # None: read from the data
    max_predictions: int | None = number_field(  # None: read from the data
        None, minimum=1, hint="omit it to read it from the data")
    global_batch_size: int = number_field(4096, minimum=1)
    # Each replica's batch runs as this many parts in turn, their gradients averaged
    # into one update (training/runtime/fit_steps.py): less memory, the same steps.
    gradient_accumulation_steps: int = number_field(1, minimum=1)
    train_steps: int = number_field(125_000, minimum=1)
    warmup_steps: int = number_field(3125, minimum=0)
    learning_rate: float = number_field(0.00176, exclusive_minimum=0.0)
    poly_power: float = number_field(1.0, minimum=0.0)
    optimizer: str = "lamb"
    weight_decay: float = number_field(0.01, minimum=0.0)
    clipnorm: float = number_field(1.0, minimum=0.0)  # 0: no clipping
    dropout: float = number_field(0.0, minimum=0.0, exclusive_maximum=1.0)  # the paper: none
    precision: str = precisions.AUTO
    strategy: str = "default"
    steps_per_execution: int = number_field(1, minimum=1)
    jit_compile: bool | None = dataclasses.field(  # None (auto): on GPU, off on CPU
        default=None, metadata={arguments.NONE_WORD: "auto"})
    checkpoint_every: int = number_field(1000, minimum=1)  # also the eval and "epoch" interval
    keep_checkpoints: int = number_field(5, minimum=1)
    eval_steps: int = number_field(100, minimum=1)
    log_every: int = number_field(100, minimum=1)  # TensorBoard interval, in steps
    seed: int = number_field(12345, minimum=0)
    shuffle_buffer: int = number_field(10_000, minimum=1)
    data_resume: str = "skip"         # "skip" consumed batches, or "reseed" the order
    deterministic: bool = False       # op determinism: bit-identical reruns, slower
    # Re-mask every training batch as it is read (`dynamic_masking.py`: whole-word
    # n-grams, the data's masked_lm_prob and max_ngram), so each pass over the data
    # sees new masks; off: the masks written by create-data. Needs spm_model (the
    # [MASK], [CLS] and [SEP] ids). Evaluation data keeps its written masks.
    dynamic_masking: bool = False
    # Train the sentence-pair head; None: as the training data's objective says
    # (create_data_config.json next to its first file; "none" -> no loss).
    sentence_pair_loss: bool | None = None

    def validate(self) -> None:
        """Raises ValueError naming the field and value."""
        for name in ("train_data", "output_dir"):
            if not getattr(self, name):
                raise UserError(f"{name} is required")
        arguments.check_numbers(self)  # every number: its type, finite, its range
        check_accumulation(self.global_batch_size, self.gradient_accumulation_steps,
                           field="global_batch_size")
        if self.seq_length is not None:  # None: from the data
            check_sequence_length(self.seq_length, where="omit it to read it from the data")
        spe = self.steps_per_execution
        for name in ("train_steps", "checkpoint_every", "eval_steps"):
            if getattr(self, name) % spe:
                raise UserError(f"{name}={getattr(self, name)} is not a multiple of "
                                 f"steps_per_execution={spe}")
        if self.dynamic_masking and not self.spm_model:
            raise UserError("dynamic_masking=true needs spm_model: the [MASK], [CLS] and [SEP] "
                            "ids of the re-masking come from the vocabulary")
        if self.data_resume not in DATA_RESUME:
            raise UserError(f"data_resume={self.data_resume!r} is not one of "
                             f"{', '.join(DATA_RESUME)}")


def _coerce(name: str, value: Any, source: str) -> Any:
    """`value` as the type of field `name`, or ValueError naming both and `source`."""
    fields = {f.name: f for f in dataclasses.fields(PretrainConfig)}
    kind = typing.get_type_hints(PretrainConfig)[name]
    if kind is dict:
        ok = isinstance(value, dict)
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif kind == typing.Optional[bool]:  # noqa: UP045 (the fields' annotations, as written)
        ok = value is None or isinstance(value, bool)
    elif kind == typing.Optional[int]:  # noqa: UP045 (the fields' annotations, as written)
        ok = value is None or (isinstance(value, int) and not isinstance(value, bool))
    else:
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok:
        raise UserError(f"{source}: {name}={value!r} is not a {fields[name].type}")
    return value


def load_config(path: str | None = None, overrides: list[str] = (),
                **options: Any) -> PretrainConfig:
    """Defaults <- JSON file `path` <- `options` (non-None) <- `key=value` overrides.

    Override values are read by the field's type (`albert_tf.infra.arguments`, the one
    KEY=VALUE grammar); `albert.FIELD=VALUE` sets an AlbertConfig field, read by its type.
    """
    values: dict[str, Any] = {}
    known = {f.name for f in dataclasses.fields(PretrainConfig)}
    if path:
        try:
            loaded = json.loads(textio.read_text(path))  # not UTF-8: file, line and byte
        except OSError as e:
            raise UserError(f"cannot read config {path}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise UserError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
        if not isinstance(loaded, dict):
            raise UserError(f"{path}: expected a JSON object")
        unknown = sorted(set(loaded) - known)
        if unknown:
            raise UserError(f"{path}: unknown keys {', '.join(unknown)}")
        values.update({k: _coerce(k, v, path) for k, v in loaded.items()})
    values.update({k: _coerce(k, v, "option") for k, v in options.items() if v is not None})
    texts = arguments.parse_overrides(overrides)
    model_texts = {key[len("albert."):]: texts.pop(key) for key in list(texts)
                   if key.startswith("albert.")}
    values.update(arguments.convert_overrides(PretrainConfig, texts))
    if model_texts:
        values["albert"] = {**values.get("albert", {}), **arguments.convert_overrides(
            AlbertConfig, model_texts, prefix="albert.")}
    config = PretrainConfig(**values)
    config.validate()
    return config
