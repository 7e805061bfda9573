"""`AlbertPreprocessor`: the Python tokenizer's rules in TensorFlow ops (tf.data, SavedModels).

Every step mirrors `albert_tf.tokenizer.spm` (see its docstring for the rules):

* invalid UTF-8 -> U+FFFD (`tf.strings.unicode_decode` with errors="replace",
  which agrees byte for byte with Python's `bytes.decode(errors="replace")`);
* whitespace runs -> one space, ends stripped, with Python's `str.isspace` set;
* NFKD with `tensorflow_text.normalize_utf8` (ICU); combining marks dropped and
  `str.lower` (Final_Sigma included) applied on code points, with tables read
  from Python's `unicodedata` (`tokenizer_unicode`);
* `tensorflow_text.FastSentencepieceTokenizer` -> ids (it breaks Viterbi ties as
  the sentencepiece package does; `SentencepieceTokenizer` does not), then the
  digit-comma rule as a ragged gather: each vocabulary id maps to the ids the Python
  tokenizer's rule gives for its piece (exact, and 4x faster than re-segmenting strings);
* packing with `trim_segments` (the original `_truncate_seq_pair` in core ops, equal to
  tensorflow-text's `RoundRobinTrimmer`, whose op older TF Serving builds lack) and
  `pack_rows` (what `combine_segments` and `pad_model_inputs` give, in a few core ops).

Residual difference: `normalize_utf8` uses ICU's Unicode version (newer than
Python 3.11's 14.0), so about a hundred code points that Python 3.11 treats as
unassigned get decomposed in the graph only. They are absent from real text.
"""

from __future__ import annotations

import logging
import os

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.errors import UserError
from albert_tf.infra import textio
from albert_tf.inputs import INPUT_NAMES
from albert_tf.lengths import PreprocessorSettings
from albert_tf.tokenizer.json_graph import UnigramGraph, wordpiece_with_added
from albert_tf.tokenizer.kinds import (
    SENTENCEPIECE,
    TOKENIZER_JSON,
    VOCABULARY_FILES,
    WORDPIECE,
    is_tokenizer_json,
    kind_of_file,
    python_tokenizer,
)
from albert_tf.tokenizer.normalize_graph import TextNormalizer
from albert_tf.tokenizer.packing import text_byte_cap
from albert_tf.tokenizer.ragged_rows import digit_comma_table, keep_first, keep_last, pack_rows, trim_segments
from albert_tf.tokenizer.spm import AlbertTokenizer, choice_qa_length
from albert_tf.tokenizer.spm_proto import spm_model_type
from albert_tf.tokenizer.traced import graph_function
from albert_tf.tokenizer.wordpiece_graph import WordPieceGraph

logger = logging.getLogger(__name__)

# The vocabulary's name among a `.keras` file's assets: our checkpoints' (spiece.model, vocab.txt).
VOCABULARY_ASSETS = VOCABULARY_FILES


def _text_tensor(texts):
    """A list (or NumPy array) of str / bytes as a tf.string tensor; anything else as is."""
    if isinstance(texts, (list, np.ndarray)):
        return tf.convert_to_tensor(texts, tf.string)
    return texts


class VocabularyAssetError(UserError):
    """A `.keras` file's vocabulary asset that is not one."""


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertPreprocessor(PreprocessorSettings, keras.layers.Layer):
    """Raw text -> ALBERT model inputs, in the graph; the same ids as `AlbertTokenizer.encode_pair`.

    Works eagerly, in `tf.data.Dataset.map`, and in a `tf.function` exported to a
    SavedModel: the SentencePiece model travels with the graph (a constant, plus
    the tracked resource of `.sentencepiece`), so a fresh process needs only
    `import tensorflow_text`. In a `.keras` file the SentencePiece model travels
    as an asset (`save_assets` / `load_assets`): the file reloads with the
    original `.model` gone. `get_config` keeps its path for `from_config`, which
    reads it only if no asset gives the vocabulary first.

    On a WordPiece vocab.txt (the Chinese models') it tokenizes with the
    `WordPieceTokenizer` rules instead (`wordpiece_graph.WordPieceGraph`, tensorflow-text's
    FastWordpieceTokenizer); packing is the same.

    Args:
      spm_model_path: the vocabulary: a SentencePiece `.model` file, a WordPiece
        vocab.txt, or a tokenizer.json, whose own rules apply (`json_graph`)
        (`kinds.kind_of_file`; read once, at construction; None: given later by
        `load_assets`).
      seq_length: length of every output row, >= 3 (also `sequence_length`, settable).
      do_lower_case, keep_accents: as for `AlbertTokenizer` (WordPiece: keep_accents
        False strips accents).
      tokenize_chinese_chars, split_characters: WordPiece's options, every CJK ideograph or
        every character a word of its own (SentencePiece ignores them).

    Call with `tf.string [B]` (one segment) or a pair `(texts_a, texts_b)`;
    returns {"input_word_ids", "input_mask", "input_type_ids"}: int32 [B, seq_length].

    Example:
      >>> pre = AlbertPreprocessor("30k-clean.model", seq_length=128)
      >>> ds = ds.map(lambda q, p: pre((q, p)))
    """

    _traced_tokenize = None  # `tokenize`'s graph function, set per vocabulary

    def __init__(self, spm_model_path: str | os.PathLike | None, seq_length: int,
                 do_lower_case: bool = True, keep_accents: bool = False,
                 tokenize_chinese_chars: bool = True, split_characters: bool = False, **kwargs):
        kwargs.pop("trainable", None)  # get_config() carries it; the layer has no weights
        super().__init__(trainable=False, **kwargs)
        self.seq_length = seq_length  # checked (PreprocessorSettings), as when set later
        self.spm_model_path = None if spm_model_path is None else os.fspath(spm_model_path)
        self.do_lower_case = bool(do_lower_case)
        self.keep_accents = bool(keep_accents)
        self.tokenize_chinese_chars = bool(tokenize_chinese_chars)
        self.split_characters = bool(split_characters)
        self._normalizer = TextNormalizer(self.do_lower_case, self.keep_accents)
        self._tokenizer = None
        self._wordpiece = None
        self._json_tokenize = None  # a tokenizer.json's tokenize (`json_graph`)
        self.model_vocab_size = None  # set by a task model: checks a .keras file's asset
        if self.spm_model_path is not None:
            self._set_vocabulary(self.spm_model_path)
        self._close_settings()  # a mistyped setting is an error from here on

    def _set_vocabulary(self, path: str) -> None:
        """Reads the vocabulary at `path` and builds the ops that use it."""
        object.__setattr__(self, "_traced_tokenize", None)  # untracked; traced anew when used
        self._json_tokenize = None
        if is_tokenizer_json(path):  # its own rules (`json_graph`), whatever the options
            tokenizer = python_tokenizer(path)
            self._vocabulary_bytes = textio.read_bytes(path)
            self._tokenizer = tokenizer
            if tokenizer.kind == WORDPIECE:
                self._wordpiece = WordPieceGraph(tokenizer)
                self._json_tokenize = wordpiece_with_added(self._wordpiece, tokenizer.spec.added)
            else:
                self._wordpiece = None
                graph = UnigramGraph(tokenizer)
                self._fast_sentencepiece = graph.sentencepiece
                self._json_tokenize = graph.tokenize
            return
        if kind_of_file(path) == WORDPIECE:
            tokenizer = python_tokenizer(path, self.do_lower_case, self.keep_accents, self.tokenize_chinese_chars,
                                         kind=WORDPIECE, split_characters=self.split_characters)
            self._wordpiece = WordPieceGraph(tokenizer)
            self._vocabulary_bytes = textio.read_bytes(path)
            self._tokenizer = tokenizer
            return
        # The Python tokenizer validates the file and owns the special ids.
        tokenizer = AlbertTokenizer(path, self.do_lower_case, keep_accents=self.keep_accents)
        model_type = spm_model_type(tokenizer.model_proto)
        if model_type != "unigram":
            raise ValueError(f"{path} is a {model_type} SentencePiece model; the "
                             "in-graph tokenizer supports unigram models (ALBERT's kind) only")
        # FastSentencepieceTokenizer, not SentencepieceTokenizer, makes the ids: the
        # latter's bundled SentencePiece breaks exact Viterbi ties the other way from
        # the sentencepiece package (":::" -> "::" ":" instead of ":" "::"), the
        # former agrees with it. Its converted model is a constant of the graph.
        self._fast_sentencepiece = tf_text.FastSentencepieceTokenizer(tokenizer.model_proto)
        # The classic op, a tracked resource, only for its byte offsets
        # (`tokenize_with_offsets`); its ids may differ on such ties.
        self._sentencepiece = tf_text.SentencepieceTokenizer(model=tokenizer.model_proto)
        self._replacements = digit_comma_table(tokenizer)
        self._vocabulary_bytes = tokenizer.model_proto
        self._wordpiece = None
        self._tokenizer = tokenizer

    def _vocabulary(self) -> AlbertTokenizer:
        if self._tokenizer is None:  # from_config: no asset gave it, so the path does
            if self.spm_model_path is None:
                raise ValueError("AlbertPreprocessor has no SentencePiece model: give "
                                 "spm_model_path")
            self._set_vocabulary(self.spm_model_path)
        return self._tokenizer

    @property
    def tokenizer(self):
        """The Python tokenizer of the same vocabulary: `AlbertTokenizer` / `WordPieceTokenizer`."""
        return self._vocabulary()

    @property
    def kind(self) -> str:
        """The tokenizer kind: "sentencepiece" or "wordpiece" (`kinds.TOKENIZER_KINDS`): the
        vocabulary's once read, else its path's (nothing is read to answer)."""
        if self._tokenizer is not None:
            return WORDPIECE if self._wordpiece is not None else SENTENCEPIECE
        path = self.spm_model_path
        if not path or (is_tokenizer_json(path) and not os.path.isfile(path)):
            return SENTENCEPIECE  # a tokenizer.json says its kind once read (its asset)
        return kind_of_file(path)

    @property
    def vocabulary_bytes(self) -> bytes:
        """The vocabulary file's bytes as read (what a checkpoint or `.keras` file ships)."""
        self._vocabulary()
        return self._vocabulary_bytes

    @property
    def sentencepiece(self):
        """tensorflow_text's SentencepieceTokenizer of the model (a tracked resource)."""
        self._vocabulary()
        if self._wordpiece is not None:
            raise ValueError(f"{self.spm_model_path} is a WordPiece vocabulary: no "
                             "SentencePiece model")
        if self._json_tokenize is not None:
            raise ValueError(f"{self.spm_model_path}: a tokenizer.json's Unigram model has no "
                             "character offsets in the graph (export span QA or token "
                             "labels with its spiece.model)")
        return self._sentencepiece

    @property
    def wordpiece(self):
        """The in-graph WordPiece tokenizer (`WordPieceGraph`); None for SentencePiece."""
        self._vocabulary()
        return self._wordpiece

    def id_to_string(self, ids: tf.Tensor) -> tf.Tensor:
        """The vocabulary's token of each id (any shape) as tf.string, in the graph."""
        self._vocabulary()
        if self._wordpiece is not None:
            return tf.gather(tf.constant(self._tokenizer.tokens), ids)
        if self._json_tokenize is not None:
            return tf.gather(tf.constant(self._tokenizer.pieces), ids)
        return self._sentencepiece.id_to_string(ids)

    @property
    def vocabulary_name(self) -> str:
        """The vocabulary's file name in a checkpoint or `.keras` file: tokenizer.json,
        else spiece.model or vocab.txt by kind."""
        self._vocabulary()
        return TOKENIZER_JSON if self._json_tokenize is not None else VOCABULARY_ASSETS[self.kind]

    # ------------------------------------------------------------ .keras assets
    def save_assets(self, dir_path: str) -> None:
        """Writes the vocabulary (the bytes read, not the file as it is now)."""
        with open(os.path.join(dir_path, self.vocabulary_name), "wb") as f:
            f.write(self.vocabulary_bytes)

    def load_assets(self, dir_path: str) -> None:
        """Reads the vocabulary a `.keras` file carries (it wins over the path), sized as the model's."""
        if dir_path is None and getattr(self, "_asset_error", None):
            raise self._asset_error  # Keras retries a failed object without its assets
        from albert_tf.checkpoint import opened  # deferred: the checkpoint room imports this one

        for name in (TOKENIZER_JSON, *VOCABULARY_ASSETS.values()):
            path = os.path.join(dir_path, name)
            if os.path.exists(path):
                try:
                    self._set_vocabulary(path)
                    if self.model_vocab_size is not None:
                        opened.check_vocab_size(
                            path, self.model_vocab_size, "the .keras file's model config")
                except (ValueError, TypeError, OSError, RuntimeError) as e:
                    # named as the user knows it: the temporary directory is Keras'
                    cause = str(e).replace(path, name) or type(e).__name__
                    self._asset_error = VocabularyAssetError(
                        f"the .keras file's {name} asset cannot be read as the model's "
                        f"vocabulary: {cause}")
                    raise self._asset_error from None
                return
        raise ValueError(f"the .keras file's assets hold no vocabulary "
                         f"({' or '.join(VOCABULARY_ASSETS.values())})")

    @classmethod
    def from_config(cls, config):
        """The layer of `get_config`; its vocabulary is read from the `.keras` file's
        asset when Keras loads one, else from `spm_model_path` when first used."""
        config = dict(config)
        path = config.pop("spm_model_path")
        layer = cls(None, **config)
        layer.spm_model_path = path
        return layer

    def normalize(self, texts: tf.Tensor) -> tf.Tensor:
        """The tokenizer's `normalize` on `tf.string [B]`."""
        texts = tf.convert_to_tensor(texts, tf.string)
        self._vocabulary()
        if self._wordpiece is not None:
            return tf.strings.reduce_join(self._wordpiece.words(texts), axis=-1, separator=" ")
        return self._normalizer(texts)

    def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """The tokenizer's `encode` on `tf.string [B]` -> int32 `[B, (tokens)]`; in traced
        graphs one function of the layer that every text graph calls (an export holds it once)."""
        self._vocabulary()
        if not tf.inside_function():
            return self._tokenize(texts)
        if self._traced_tokenize is None:
            object.__setattr__(self, "_traced_tokenize", graph_function(
                self._tokenize, input_signature=[tf.TensorSpec([None], tf.string)]))
        return self._traced_tokenize(tf.convert_to_tensor(texts, tf.string))

    def _tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        if self._json_tokenize is not None:
            ids = self._json_tokenize(tf.convert_to_tensor(texts, tf.string))
            return tf.cast(ids, tf.int32).with_row_splits_dtype(tf.int64)
        if self._wordpiece is not None:
            ids = self._wordpiece.tokenize(tf.convert_to_tensor(texts, tf.string))
            return tf.cast(ids, tf.int32).with_row_splits_dtype(tf.int64)
        ids = self._fast_sentencepiece.tokenize(self.normalize(texts))  # [B, (P)]
        ids = ids.with_row_splits_dtype(tf.int64)
        values, lengths = self._replacements
        table = tf.RaggedTensor.from_row_lengths(tf.constant(values), tf.constant(lengths))
        return tf.gather(table, ids).merge_dims(1, 2)  # [B, (P), (k)] -> [B, (T)]

    def __call__(self, inputs, *args, **kwargs):
        # Python strings and lists of them too, as tf.string tensors.
        if isinstance(inputs, tuple):
            inputs = tuple(_text_tensor(segment) for segment in inputs)
        else:
            inputs = _text_tensor(inputs)
        return super().__call__(inputs, *args, **kwargs)

    def cut(self, texts: tf.Tensor, keep_last: bool = False) -> tf.Tensor:
        """Each text's first (`keep_last`: last) bytes a window can use (`spm.cut_text`)."""
        cap, lengths = text_byte_cap(self.seq_length), tf.strings.length(texts)
        start = tf.maximum(lengths - cap, 0) if keep_last else tf.zeros_like(lengths)
        return tf.strings.substr(texts, start, tf.fill(tf.shape(texts), cap))

    def call(self, inputs) -> dict[str, tf.Tensor]:
        segments = [self.cut(segment) for segment in self._segments(inputs)]
        batch = tf.shape(segments[0])[0]
        if len(segments) == 2:  # rows that do not pair up would crash tensorflow-text's trimmer
            tf.debugging.assert_equal(batch, tf.shape(segments[1])[0], message=(
                "AlbertPreprocessor: the two text segments have different batch sizes"))
        # One normalise + tokenize pass over all segments, then split back.
        ids = self.tokenize(tf.concat(segments, axis=0))
        ids = [ids[i * batch:(i + 1) * batch] for i in range(len(segments))]
        return self.pack(ids)[0]

    def pack(self, segments: list[tf.RaggedTensor]) -> tuple[dict[str, tf.Tensor], list]:
        """`[CLS] A [SEP] (B [SEP])` packing of one or two token-id segments [B, (n)].

        The one packing function (`call`, the serving signatures). Segments are trimmed
        round-robin to fit `seq_length`, as `AlbertTokenizer.encode_pair` does.

        Returns:
          (features: {input_word_ids, input_mask, input_type_ids} int32
          [B, seq_length], trimmed: the segments as kept after truncation).
        """
        tok = self.tokenizer
        trimmed = trim_segments(segments, self.seq_length - 1 - len(segments))
        values = pack_rows(trimmed, self.seq_length, tok.cls_id, tok.sep_id, tok.pad_id)
        return dict(zip(INPUT_NAMES, values)), trimmed

    def pack_choices(self, contexts: tf.Tensor, options: tf.Tensor,
                     max_qa_length: int) -> dict[str, tf.Tensor]:
        """The [B, K, seq_length] multiple-choice inputs of contexts [B] and options [B, K].

        The one multiple-choice packing (the task models' raw text and the served
        signature): option k of row b is `[CLS] context [SEP] option [SEP]`, cut as
        `albert_tf.tokenizer.spm.cut_choice` says (RACE's rule).
        """
        keep = choice_qa_length(max_qa_length, self.seq_length)
        shape = tf.shape(options, tf.int64)  # [B, K]
        qa = keep_last(self.tokenize(self.cut(tf.reshape(options, [-1]), True)), keep)  # [B*K, (m)]
        context = tf.gather(self.tokenize(self.cut(contexts)), tf.repeat(tf.range(shape[0]),
                                                                          shape[1]))
        context = keep_first(context, self.seq_length - 3 - qa.row_lengths())
        flat, _ = self.pack([context, qa])  # [B*K, T]
        return {name: tf.reshape(value, tf.stack([shape[0], shape[1], -1]))
                for name, value in flat.items()}

    def _segments(self, inputs) -> list[tf.Tensor]:
        segments = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
        if len(segments) not in (1, 2):
            raise ValueError(f"AlbertPreprocessor takes 1 or 2 text segments, not {len(segments)}")
        out = []
        for segment in segments:
            segment = tf.convert_to_tensor(segment)
            if segment.dtype != tf.string:
                raise TypeError(f"AlbertPreprocessor expects tf.string text, got {segment.dtype}")
            if segment.shape.rank == 2 and segment.shape[-1] == 1:
                segment = tf.squeeze(segment, axis=-1)  # [B, 1], as keras.Input(shape=(1,)) gives
            if segment.shape.rank != 1:
                raise ValueError(f"AlbertPreprocessor expects text of shape [batch], not {segment.shape}")
            out.append(segment)
        return out

    def compute_output_spec(self, inputs):
        batch = (list(inputs)[0] if isinstance(inputs, (tuple, list)) else inputs).shape[0]
        return {name: keras.KerasTensor((batch, self.seq_length), dtype="int32")
                for name in INPUT_NAMES}

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(spm_model_path=self.spm_model_path, seq_length=self.seq_length,
                      do_lower_case=self.do_lower_case, keep_accents=self.keep_accents,
                      tokenize_chinese_chars=self.tokenize_chinese_chars,
                      split_characters=self.split_characters)
        return config
