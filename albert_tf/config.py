"""AlbertConfig: the model's hyperparameters, under the original albert_config.json names.

One frozen dataclass is the single home for architectural defaults. It reads the
original google-research `albert_config.json` files as released (brightmart/albert_zh's
too, with their own keys) and Hugging Face ALBERT `config.json` files, writes
`albert_config.json`, and carries the paper's sizes (`SIZES`, `from_size`); a *preset*,
as in KerasHub, is what a model's `from_preset` loads weights from.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import warnings
from typing import Any

from albert_tf.config_keys import HF_ACTIVATIONS, IGNORED_HF_KEYS, IGNORED_KEYS, check_ln_type
from albert_tf.errors import UserError
from albert_tf.numerics import ACTIVATIONS, LAYER_NORM_EPSILON

SHARING_MODES = ("all", "attention", "ffn", "none")

# Where the factorized embedding goes from width E to H (`embedding_projection_position`):
#   "after_sum"   google-research's: word, position and token-type embeddings (width E)
#                 summed and LayerNorm'ed, then `embedding_hidden_mapping_in` (E -> H,
#                 with a bias; none when E == H)
#   "before_sum"  brightmart/albert_zh's own checkpoints: the word vector projected at
#                 once (`word_embeddings_2` [E, H], no bias), then position and token-type
#                 embeddings of width H added and LayerNorm'ed at width H
EMBEDDING_PROJECTION_POSITIONS = ("after_sum", "before_sum")

class ConfigError(UserError):
    """An invalid or unreadable model configuration."""


# The shortest sequence a model input can be: [CLS] A [SEP] B [SEP] with both segments empty.
MIN_SEQ_LENGTH = 3
# The sequence length when nothing chooses one (a preprocessor from a checkpoint without
# a fine-tuning length, a KerasHub preset's): the original pretraining's, run_glue.sh's,
# run_race's and KerasHub's.
DEFAULT_SEQ_LENGTH = 512
# Fine-tuning on one's own short texts (BERT's usual recipe) and the Python tokenizer's
# encode_pair default.
SHORT_SEQ_LENGTH = 128


# ------------------------------------------------------------------ the size bounds
# The largest value a file or a flag may give each size, checked before anything is
# allocated or looped over (a checkpoint's config, a `.keras` file, a task record, a
# preprocessor, create-data's and every command's --seq-length). Each is several times
# the largest released model's (albert-xxlarge: H 4096, I 16384, 12 layers; bert-large
# 24 layers; multilingual vocabularies ~250k; ALBERT's 512 positions), so no real model
# is refused, and none lets a stranger's file ask for tens of GB or hang in a loop.
MAX_SIZES = {
    "vocab_size": 1 << 20,               # a [V, E] table: 1M rows
    "embedding_size": 1 << 14,
    "hidden_size": 1 << 14,
    "intermediate_size": 1 << 16,
    "num_attention_heads": 1 << 10,
    "num_hidden_layers": 256,            # depth loops even when the weights are shared
    "num_hidden_groups": 256,
    "inner_group_num": 16,
    "max_position_embeddings": 1 << 12,  # 4096: attention costs T^2 per head
    "type_vocab_size": 1 << 10,
}
# Depth the encoder walks: num_hidden_layers x inner_group_num blocks per call.
MAX_DEPTH = 256
# All the encoder's weights (`encoder_parameters`): 2^30 float32 are 4 GiB (albert-xxlarge
# holds 2.2e8, bert-large 3.3e8).
MAX_PARAMETERS = 1 << 30
# The longest sequence any tokenizer, record or flag may ask for (no model has more positions).
MAX_SEQ_LENGTH = MAX_SIZES["max_position_embeddings"]
# The most classes a head (classification, token classification) may have: 32768 x H.
MAX_CLASSES = 1 << 15
# The most doc-stride windows a served span-QA context may be given (a task record's
# max_windows; its default is 32): each window is one row of the export's length.
MAX_WINDOWS = 1 << 10


def check_size(name: str, value, maximum: int, where: str = "", error=None) -> int:
    """`value` if it is an integer in [1, maximum], else `error` (ConfigError) naming the
    field, the value, the bound and `where`: the one form of every size bound."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        where = f" ({where})" if where else ""
        raise (error or ConfigError)(f"{name}={value!r} must be an integer from 1 to "
                                     f"{maximum:,}{where}")
    return value


def check_num_classes(value, where: str = "", error=None) -> int:
    """The one bound on a head's classes (`MAX_CLASSES`)."""
    return check_size("num_classes", value, MAX_CLASSES, where, error)


def check_sequence_length(seq_length: int, max_position_embeddings: int | None = None,
                          where: str = "") -> int:
    """Returns `seq_length` if it is an int in [MIN_SEQ_LENGTH, max_position_embeddings].

    The one sequence-length rule: the tokenizers, pretraining, fine-tuning, export,
    the demo, the ablations and the task record all call it, before any work. The
    minimum holds [CLS] [SEP] [SEP]; the maximum is the model's position table (a
    longer sequence would index past it: an error on CPU, a silent read of zeros on
    GPU). Without `max_position_embeddings` (a tokenizer knows no model) only the
    minimum applies. A command that needs more room for its own reason (SQuAD's
    question and context, a pretraining pair) checks that separately, after this.

    Args: `seq_length`, tokens per sequence ([CLS] and [SEP]s included); the model's
    position table, or None; `where` the value comes from, for the message.

    Raises ConfigError, one text naming the value, the limits and `where`:
    `check_sequence_length(2, 512, "--seq-length")` -> "seq_length=2 must be an integer
    from 3 ([CLS] [SEP] [SEP]) to max_position_embeddings=512 (--seq-length)".
    """
    is_int = isinstance(seq_length, int) and not isinstance(seq_length, bool)
    fits = (is_int and MIN_SEQ_LENGTH <= seq_length <= MAX_SEQ_LENGTH
            and (max_position_embeddings is None or seq_length <= max_position_embeddings))
    if not fits:
        limit = ("the model's max_position_embeddings" if max_position_embeddings is None
                 else f"max_position_embeddings={max_position_embeddings}")
        where = f" ({where})" if where else ""
        if is_int and seq_length > MAX_SEQ_LENGTH and max_position_embeddings is None:
            raise ConfigError(f"seq_length={seq_length} exceeds the longest any model may "
                              f"have, {MAX_SEQ_LENGTH}{where}")
        raise ConfigError(f"seq_length={seq_length!r} must be an integer from {MIN_SEQ_LENGTH} "
                          f"([CLS] [SEP] [SEP]) to {limit}{where}")
    return seq_length


@dataclasses.dataclass(frozen=True)
class AlbertConfig:
    """ALBERT hyperparameters; field names follow the original albert_config.json.

    Defaults are albert-base (V=30000, E=128, H=768, L=12, A=12, FFN=3072) with all
    weights shared across depth and dropout off (the paper's pretraining finding).
    `embedding_projection_position` is where E becomes H (`EMBEDDING_PROJECTION_POSITIONS`):
    "after_sum" (google-research's) or "before_sum" (brightmart/albert_zh's own layout).

    Example:
        >>> cfg = AlbertConfig.from_size("albert-large")
        >>> cfg.hidden_size, cfg.num_attention_heads
        (1024, 16)
    """

    vocab_size: int = 30000
    embedding_size: int = 128
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_hidden_groups: int = 1
    inner_group_num: int = 1
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    sharing: str = "all"
    embedding_projection_position: str = "after_sum"

    def __post_init__(self):
        self.validate()

    # ----------------------------------------------------------------- checks
    def validate(self, source: str | None = None) -> None:
        """Raises ConfigError naming the field, the value and (if given) the file."""
        where = f" (in {source})" if source else ""
        positive = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                    "num_hidden_groups", "inner_group_num", "num_attention_heads",
                    "intermediate_size", "max_position_embeddings", "type_vocab_size")
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name}={value!r} must be a positive integer{where}")
            if value > MAX_SIZES[name]:
                raise ConfigError(f"{name}={value:,} exceeds the largest allowed, "
                                  f"{MAX_SIZES[name]:,}{where}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size={self.hidden_size} is not divisible by "
                f"num_attention_heads={self.num_attention_heads}{where}")
        if self.num_hidden_groups > self.num_hidden_layers:
            # The original would use only the groups layer * G // L names (a gap between
            # each) and no others: a layout albert-tf does not build.
            used = sorted({self.group_of_layer(layer) for layer in range(self.num_hidden_layers)})
            raise ConfigError(
                f"num_hidden_groups={self.num_hidden_groups} exceeds "
                f"num_hidden_layers={self.num_hidden_layers}: the original code would use only "
                f"groups {', '.join(map(str, used[:8]))}{', ...' if len(used) > 8 else ''}"
                f" (one per layer), which albert-tf does not build{where}")
        self._check_totals(where)
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range"):
            value = getattr(self, name)  # NaN fails every comparison below: refuse it first
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not math.isfinite(value):
                raise ConfigError(f"{name}={value!r} must be a finite number{where}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ConfigError(f"{name}={value!r} must be in [0, 1){where}")
        if not isinstance(self.initializer_range, (int, float)) or self.initializer_range <= 0:
            raise ConfigError(f"initializer_range={self.initializer_range!r} must be > 0{where}")
        if not isinstance(self.hidden_act, str) or self.hidden_act not in ACTIVATIONS:
            raise ConfigError(
                f"hidden_act={self.hidden_act!r} is not one of {', '.join(ACTIVATIONS)}{where}")
        if not isinstance(self.sharing, str) or self.sharing not in SHARING_MODES:
            raise ConfigError(
                f"sharing={self.sharing!r} is not one of {', '.join(SHARING_MODES)}{where}")
        position = self.embedding_projection_position
        if not isinstance(position, str) or position not in EMBEDDING_PROJECTION_POSITIONS:
            raise ConfigError(f"embedding_projection_position={position!r} is not one of "
                              f"{', '.join(EMBEDDING_PROJECTION_POSITIONS)}{where}")

    def _check_totals(self, where: str) -> None:
        """Depth and weight count: each field may be in bounds and their product not."""
        depth = self.num_hidden_layers * self.inner_group_num
        if depth > MAX_DEPTH:
            raise ConfigError(f"num_hidden_layers={self.num_hidden_layers} x inner_group_num="
                              f"{self.inner_group_num} = {depth} blocks exceeds the largest "
                              f"allowed depth, {MAX_DEPTH}{where}")
        count = self.encoder_parameters()
        if count > MAX_PARAMETERS:
            raise ConfigError(f"the config asks for {count:,} weights ({4 * count / 2**30:.1f} "
                              f"GiB in float32), more than the {MAX_PARAMETERS:,} allowed"
                              f"{where}")

    # --------------------------------------------------------------- derived
    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def group_of_layer(self, layer_index: int) -> int:
        """The group whose weights depth position `layer_index` uses (as the original)."""
        return layer_index * self.num_hidden_groups // self.num_hidden_layers

    def encoder_parameters(self) -> int:
        """The encoder's weight count, pooler included: what `AlbertEncoder(self)`
        allocates, from the config alone (a reader compares it with a checkpoint's
        tensors before building anything; `albert-tf params` prints it)."""
        v, e, h, i = self.vocab_size, self.embedding_size, self.hidden_size, \
            self.intermediate_size
        tables = self.max_position_embeddings + self.type_vocab_size
        if self.embedding_projection_position == "before_sum":  # word [V,E] @ [E,H], rest at H
            embeddings, projection = v * e + e * h + tables * h + 2 * h, 0
        else:
            embeddings = (v + tables) * e + 2 * e
            projection = e * h + h if e != h else 0
        attention = 4 * (h * h + h) + 2 * h  # q, k, v, output + LayerNorm
        ffn = h * i + i + i * h + h + 2 * h  # intermediate, output + LayerNorm
        # Distinct sublayers: one per group and inner index when shared (every group
        # occurs, as num_hidden_groups <= num_hidden_layers), else one per layer.
        shared = self.num_hidden_groups * self.inner_group_num
        private = self.num_hidden_layers * self.inner_group_num
        attentions = shared if self.sharing in ("all", "attention") else private
        ffns = shared if self.sharing in ("all", "ffn") else private
        return embeddings + projection + attentions * attention + ffns * ffn + h * h + h

    # ---------------------------------------------------------- conversions
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any], source: str | None = None) -> AlbertConfig:
        """Builds a config from albert_config.json-style keys; unknown keys are an error."""
        where = f" in {source}" if source else ""
        if not isinstance(values, dict):
            raise ConfigError(f"expected a dict of config fields{where}, got "
                              f"{type(values).__name__}")
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - fields - IGNORED_KEYS)
        if unknown:
            raise ConfigError(f"unknown config keys{where}: {', '.join(unknown)}")
        check_ln_type(values.get("ln_type"), where, ConfigError)
        values = {k: v for k, v in values.items() if k in fields}
        try:
            return cls(**values)
        except ConfigError as e:
            if source:
                raise ConfigError(f"{e} (in {source})") from None
            raise
        except TypeError as e:  # a value of the wrong kind reaching a comparison
            raise ConfigError(f"invalid config value{where}: {e}") from None

    @classmethod
    def from_hf_dict(cls, values: dict[str, Any], source: str | None = None) -> AlbertConfig:
        """Builds a config from a Hugging Face ALBERT config.json dictionary."""
        values = dict(values)
        where = f" (in {source})" if source else ""
        act = values.get("hidden_act", "gelu_new")
        if not isinstance(act, str) or act not in HF_ACTIVATIONS:
            raise ConfigError(f"hidden_act={act!r} is not a supported activation{where}")
        values["hidden_act"] = HF_ACTIVATIONS[act]
        eps = values.get("layer_norm_eps", LAYER_NORM_EPSILON)
        if isinstance(eps, bool) or not isinstance(eps, (int, float)):
            raise ConfigError(f"layer_norm_eps={eps!r} must be a number{where}")
        if not abs(eps - LAYER_NORM_EPSILON) <= 1e-15:  # NaN too
            raise ConfigError(f"layer_norm_eps={eps} is not supported; ALBERT uses "
                              f"{LAYER_NORM_EPSILON}{where}")
        if values.get("position_embedding_type", "absolute") != "absolute":
            raise ConfigError(
                f"position_embedding_type={values['position_embedding_type']!r} is not "
                f"supported; only 'absolute'{where}")
        values = {k: v for k, v in values.items() if k not in IGNORED_HF_KEYS}
        return cls.from_dict(values, source)

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> AlbertConfig:
        """Reads an original albert_config.json or a Hugging Face ALBERT config.json."""
        from albert_tf.infra import textio  # deferred: the layers do no I/O at import
        path = os.fspath(path)
        try:
            values = json.loads(textio.read_text(path))  # not UTF-8: file, line and byte
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {path}") from None
        except OSError as e:
            raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from None
        except (textio.EncodingError, textio.FileSizeError) as e:
            raise ConfigError(str(e)) from None
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
        except RecursionError:  # [[[[... nested deeper than the parser goes
            raise ConfigError(f"{path}: invalid JSON: nested too deeply") from None
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: expected a JSON object, got {type(values).__name__}")
        if values.get("model_type") == "albert" or "architectures" in values:
            return cls.from_hf_dict(values, path)
        return cls.from_dict(values, path)

    def to_json_file(self, path: str | os.PathLike) -> None:
        """Writes albert_config.json (atomically: a temporary file, then a rename)."""
        from albert_tf.infra import atomic  # deferred: the layers do no I/O at import
        atomic.atomic_write_json(os.fspath(path), self.to_dict(), sort_keys=True)

    def replace(self, **changes: Any) -> AlbertConfig:
        return dataclasses.replace(self, **changes)

    # --------------------------------------------------------------- sizes
    @classmethod
    def from_size(cls, name: str, **overrides: Any) -> AlbertConfig:
        """The paper's configurations (Table 1): albert-{base,large,xlarge,xxlarge}, bert-{base,large}."""
        if name not in SIZES:
            raise ConfigError(f"unknown size {name!r}; choose one of {', '.join(SIZES)}")
        return cls(**{**SIZES[name], **overrides})

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> AlbertConfig:
        """`from_size`'s old name, for one release (a FutureWarning)."""
        warnings.warn("AlbertConfig.from_preset is now AlbertConfig.from_size (a preset is "
                      "what a model's from_preset loads weights from)", FutureWarning, 2)
        return cls.from_size(name, **overrides)

    @classmethod
    def from_size_or_file(cls, spec: str) -> AlbertConfig:
        """A size (albert-base, ...) or the path of a config JSON file; neither is an
        unknown size listing the sizes, unless it looks like a path (a missing file)."""
        if spec in SIZES:
            return cls.from_size(spec)
        if os.path.exists(spec) or os.sep in spec or spec.endswith(".json"):
            return cls.from_json_file(spec)
        raise ConfigError(f"unknown size {spec!r}; sizes: {', '.join(SIZES)} "
                          "(or give the path of an albert_config.json)")

    def default_seq_length(self) -> int:
        """DEFAULT_SEQ_LENGTH, at most the position table."""
        return min(DEFAULT_SEQ_LENGTH, self.max_position_embeddings)

    def check_sequence_length(self, seq_length: int, where: str = "") -> int:
        """`check_sequence_length(seq_length, self.max_position_embeddings, where)`."""
        return check_sequence_length(seq_length, self.max_position_embeddings, where)

    @classmethod
    def size_names(cls) -> tuple[str, ...]:
        return tuple(SIZES)


def _arch(hidden: int, layers: int, embedding: int, sharing: str = "all") -> dict[str, Any]:
    # The paper: heads = H / 64, FFN = 4H.
    return dict(hidden_size=hidden, num_hidden_layers=layers, embedding_size=embedding,
                num_attention_heads=hidden // 64, intermediate_size=4 * hidden,
                sharing=sharing)


SIZES: dict[str, dict[str, Any]] = {
    "albert-base": _arch(768, 12, 128),
    "albert-large": _arch(1024, 24, 128),
    "albert-xlarge": _arch(2048, 24, 128),
    "albert-xxlarge": _arch(4096, 12, 128),
    # BERT as the paper compares it: E = H, nothing shared, dropout as in BERT.
    "bert-base": {**_arch(768, 12, 768, "none"), "hidden_dropout_prob": 0.1,
                  "attention_probs_dropout_prob": 0.1},
    "bert-large": {**_arch(1024, 24, 1024, "none"), "hidden_dropout_prob": 0.1,
                   "attention_probs_dropout_prob": 0.1},
}

# What the paper's Table 1 reports, for the `albert-tf params` table.
PAPER_PARAMETERS = {"albert-base": "12M", "albert-large": "18M", "albert-xlarge": "60M",
                    "albert-xxlarge": "235M", "bert-base": "108M", "bert-large": "334M"}
