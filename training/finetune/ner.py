"""Named-entity recognition: tagged words in, entity-level F1 and CoNLL prediction files out.

Each word is tokenized on its own; its first piece carries the word's tag and its
other pieces are labelled `IGNORED_LABEL`, which the token classifier's loss
leaves out (a word the vocabulary cannot cover at all becomes one <unk>). A
sentence longer than seq_length - 2 pieces is cut into overlapping windows
(`albert_tf.tagging.windows`); training sees every window, and a word's prediction
comes from the window that gives it the most context (`tagging.best_window`).

Evaluation reads entities from the tags by conlleval's rule (`metrics.entity_scores`,
and per entity type `metrics.entity_report`); each evaluation set's words, gold tags and predicted tags are written to
`predictions_<set>.txt` in conlleval's layout (`WORD GOLD PRED`, a blank line
between sentences), so conlleval or seqeval can rescore the file.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import os

import keras
import numpy as np

from albert_tf import AlbertTokenClassifier, tagging
from albert_tf.infra.atomic import atomic_write
from albert_tf.inputs import INPUT_NAMES
from albert_tf.tasks import IGNORED_LABEL
from albert_tf.tokenizer.kinds import WORDPIECE

from . import metrics
from .bucketing import Encoded
from .conll import TaggedFile, check_detected_bioes, check_labels, check_scheme
from .examples import DataError, progress

logger = logging.getLogger(__name__)

# Evaluation predictions: <output>/predictions_<set>.txt.
PREDICTIONS = "predictions"
PREDICTION_FILES = (f"{PREDICTIONS}_*.txt",)
SCORES = ("precision", "recall", "f1")


@dataclasses.dataclass
class Windows:
    """A file's sentences as model inputs, and where each word's prediction is read.

    Attributes:
      encoded: one example per window: the inputs and the per-piece labels [L_i].
      reads: per sentence, per word, (example index, position of its first piece).
    """

    encoded: Encoded
    reads: list[list[tuple[int, int]]]


def encode_sentences(tokenizer, data: TaggedFile, label_names: list[str],
                     seq_length: int) -> Windows:
    """Tokenizes each word, labels its first piece and windows long sentences.

    Args:
      tokenizer: an `AlbertTokenizer`.
      data: the tagged sentences (every tag among `label_names`).
      label_names: the classes in id order.
      seq_length: the packed length; windows hold seq_length - 2 pieces.
    """
    index = {name: i for i, name in enumerate(label_names)}
    features = {name: [] for name in INPUT_NAMES}
    labels, reads, unknown, windowed = [], [], 0, 0
    for sentence in progress(data.sentences, len(data), "tokenizing"):
        pieces, firsts, tags = [], [], []
        for word, tag in zip(sentence.words, sentence.tags):
            ids = tokenizer.encode(word)
            if not ids or all(i == tokenizer.unk_id for i in ids):
                unknown += 1
                ids = ids or [tokenizer.unk_id]  # a word of nothing the vocabulary keeps
            firsts.append(len(pieces))
            tags.append(index[tag])
            pieces.extend(ids)
        spans = tagging.windows(len(pieces), seq_length - 2)
        windowed += len(spans) > 1
        first_example = len(labels)
        for start, end in spans:
            row = np.full(end - start + 2, IGNORED_LABEL, np.int32)  # [CLS] pieces [SEP]
            # firsts increase: the window's words are one slice (linear over all windows)
            for word in range(bisect.bisect_left(firsts, start), bisect.bisect_left(firsts, end)):
                row[firsts[word] - start + 1] = tags[word]
            packed = tokenizer.pack(pieces[start:end], seq_length=seq_length)
            length = end - start + 2
            for name in INPUT_NAMES:
                features[name].append(np.asarray(packed[name][:length], np.int32))
            labels.append(row)
        reads.append([(first_example + w, p - spans[w][0] + 1) for p in firsts
                      for w in [tagging.best_window(p, spans)]])
    if unknown:
        logger.info("%s: %d words the vocabulary cannot cover, read as <unk>", data.path, unknown)
    if windowed:
        logger.info("%s: %d sentences longer than %d pieces, read in windows", data.path,
                    windowed, seq_length - 2)
    label_array = np.empty(len(labels), object)
    label_array[:] = labels
    return Windows(Encoded(features, {"logits": label_array}), reads)


class NerTask:
    """Token classification of tagged words, scored by entity-level F1 (see the module).

    Args:
      train: the training file; its tags decide the scheme and the labels unless given.
      evals: evaluation set name ("dev", "test") -> its file.
      tokenizer: an `AlbertTokenizer`.
      seq_length: the packed length.
      label_names: the classes in id order (None: every tag of the scheme for the
        training file's entity types, `tagging.scheme_label_names`).
      tag_scheme: iob1, iob2 or bioes (None: read from the training file).
    """

    def __init__(self, train: TaggedFile, evals: dict[str, TaggedFile], tokenizer,
                 seq_length: int, label_names: list[str] | None = None,
                 tag_scheme: str | None = None):
        self.name = "ner"
        self.tag_scheme = tag_scheme or tagging.detect_scheme(s.tags for s in train.sentences)
        if tag_scheme is None and self.tag_scheme == "bioes":
            check_detected_bioes(train)
        for data in (train, *evals.values()):
            check_scheme(data, self.tag_scheme)
        kinds = {tagging.split_tag(t)[1] for s in train.sentences for t in s.tags} - {""}
        self.label_names = list(label_names) if label_names is not None else \
            tagging.scheme_label_names(kinds, self.tag_scheme)
        for data in (train, *evals.values()):
            check_labels(data, self.label_names)
        if len(self.label_names) < 2:
            raise DataError(f"{train.path}: no entity tags (every word is O)")
        self.split_characters = splits_characters(train, tokenizer)
        self.files = evals
        self.train = encode_sentences(tokenizer, train, self.label_names, seq_length).encoded
        self.windows = {name: encode_sentences(tokenizer, data, self.label_names, seq_length)
                        for name, data in evals.items()}
        self.evals = {name: w.encoded for name, w in self.windows.items()}
        self.main_metric = "f1" + (f"_{next(iter(evals))}" if len(evals) > 1 else "")
        logger.info("%s: %d sentences (%d windows), %s tags, labels %s", train.path, len(train),
                    len(self.train), self.tag_scheme, self.label_names)

    def build_model(self, config, encoder=None) -> keras.Model:
        return AlbertTokenClassifier(config, len(self.label_names), encoder=encoder)

    def checkpoint_info(self) -> dict:
        """The task record's fields beyond the classes: the scheme the tags were read in,
        and whether text is read character by character (`splits_characters`)."""
        return {"tag_scheme": self.tag_scheme, "split_characters": self.split_characters}

    def predicted_tags(self, name: str, predict) -> list[list[str]]:
        """Each sentence's predicted tags: a word's is its first piece's best class in
        the window that gives the word the most context."""
        logits = predict(self.evals[name])  # per window: [T, C] (the model's one output)
        best = [np.argmax(rows, axis=-1) for rows in logits]
        return [[self.label_names[int(best[example][position])] for example, position in words]
                for words in self.windows[name].reads]

    def evaluate(self, predict) -> dict[str, float]:
        """Entity-level precision, recall and F1 (conlleval's) on every evaluation set,
        then each entity type's as `<TYPE>_precision`, `_recall`, `_f1`, `_support`
        (`metrics.entity_report`: seqeval's classification_report)."""
        results = {}
        for name, data in self.files.items():
            gold = [s.tags for s in data.sentences]
            predicted = self.predicted_tags(name, predict)
            scores = metrics.entity_scores(gold, predicted)
            suffix = f"_{name}" if len(self.files) > 1 else ""
            results.update({key + suffix: scores[key] for key in SCORES})
            for kind, row in metrics.entity_report(gold, predicted).items():
                results.update({f"{kind}_{key}{suffix}": value for key, value in row.items()})
        return results

    def write_predictions(self, predict, output_dir: str) -> list[str]:
        """Writes `predictions_<set>.txt` per evaluation set (`write_conll`); the paths."""
        paths = []
        for name, data in self.files.items():
            paths.append(os.path.join(output_dir, f"{PREDICTIONS}_{name}.txt"))
            write_conll(paths[-1], data, self.predicted_tags(name, predict))
        return paths


def splits_characters(train: TaggedFile, tokenizer) -> bool:
    """Whether every training word is one character (Chinese NER files: People's Daily,
    MSRA, Weibo, Resume, CLUENER), for a WordPiece model: then the model is served text
    split the same way, every character a word (digits and Latin letters included, which
    WordPiece would otherwise read as runs: "12日" as "12", "日")."""
    words = [w for s in train.sentences for w in s.words]
    if not words or any(len(w) != 1 for w in words):
        return False
    if getattr(tokenizer, "kind", None) != WORDPIECE:
        logger.warning("%s: every word is one character, but a SentencePiece model reads "
                       "served text word by word; a WordPiece model (vocab.txt) reads it "
                       "character by character as trained", train.path)
        return False
    logger.info("%s: every word is one character: the model reads text character by "
                "character (recorded as split_characters)", train.path)
    return True


def write_conll(path: str, data: TaggedFile, predicted: list[list[str]]) -> None:
    """conlleval's input: `WORD GOLD PRED` per word, a blank line after each sentence."""
    with atomic_write(path) as f:
        for sentence, tags in zip(data.sentences, predicted):
            for word, gold, guess in zip(sentence.words, sentence.tags, tags):
                f.write(f"{word} {gold} {guess}\n")
            f.write("\n")
