"""Shared pytest fixtures: real text and SentencePiece models trained inside the test session.

Nothing is downloaded: the text is the embedded corpus (Python's own
documentation and docstrings), and the vocabularies are trained from it with
`albert_tf.training.data.vocab.train_vocab`, the code path of `albert-tf vocab`,
deterministically (the same model every run).
"""

from __future__ import annotations

import random

import pytest

from tests.helpers.module_order import longest_first

_NUM_DOCUMENTS = 300
_VOCAB_SIZE = 1000
_VOCAB_LINES = 5000  # sentences the vocabularies are trained on: a few seconds each


@pytest.fixture(scope="session")
def corpus_documents() -> list[list[str]]:
    """300 documents of real English prose from `embedded_documents()`, each a list of
    sentences (about 13,000 sentences, 1.1M characters). Session-scoped; do not mutate."""
    from albert_tf.training.data.embedded import embedded_documents

    return list(embedded_documents(max_documents=_NUM_DOCUMENTS))


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory, corpus_documents) -> str:
    """`corpus_documents` written in the original pretraining text layout: one
    sentence per line, a blank line after each document. Path to a .txt file."""
    from albert_tf.training.data.corpus import write_corpus_file

    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    write_corpus_file(str(path), iter(corpus_documents))
    return str(path)


@pytest.fixture(scope="session")
def _vocab_corpus_file(tmp_path_factory, corpus_documents) -> str:
    """The first 5,000 sentences of the corpus: enough for a 1,000-piece vocabulary."""
    sentences = [s for doc in corpus_documents for s in doc][:_VOCAB_LINES]
    path = tmp_path_factory.mktemp("vocab_corpus") / "sentences.txt"
    path.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    return str(path)


def _train(tmp_path_factory, name: str, inputs: list[str], **kwargs) -> str:
    from albert_tf.training.data.vocab import train_vocab

    prefix = tmp_path_factory.mktemp("spm") / name
    # All lines and one thread: sentencepiece's line sampling ignores its seed, so
    # sampling would make the fixture differ from run to run.
    model_path, _ = train_vocab(inputs, str(prefix), _VOCAB_SIZE, input_sentence_size=0,
                                num_threads=1, **kwargs)
    return model_path


@pytest.fixture(scope="session")
def spm_model_path(tmp_path_factory, _vocab_corpus_file) -> str:
    """Path to a lowercase ALBERT-convention SentencePiece unigram .model (vocab_size
    1000; <pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4, user-defined symbols at 5-12,
    no BOS/EOS), trained with `train_vocab` on the first 5,000 sentences of
    `corpus_documents` (deterministic). Use it with `AlbertTokenizer(spm_model_path)`
    or `AlbertPreprocessor(spm_model_path, seq_length)` (do_lower_case=True)."""
    return _train(tmp_path_factory, "lower", [_vocab_corpus_file])


@pytest.fixture(scope="session")
def cased_spm_model_path(tmp_path_factory, _vocab_corpus_file) -> str:
    """Like `spm_model_path` but trained with do_lower_case=False (`--no-lower-case`):
    pieces keep their case. Use with `AlbertTokenizer(path, do_lower_case=False)`."""
    return _train(tmp_path_factory, "cased", [_vocab_corpus_file], do_lower_case=False)


def _numbers_file(path) -> str:
    """Lines dense in "digit," pieces ("1,000,", "x3,") so the vocabulary learns them."""
    rng = random.Random(7)
    words = ["item", "x", "v", "page", "step", "row", "in", "paid", "costs", "about"]
    lines = []
    for _ in range(1500):
        parts = []
        for _ in range(rng.randint(3, 8)):
            value = rng.choice([rng.randint(0, 20), rng.randint(1000, 99999), 1000000])
            number = f"{value:,}" if rng.random() < 0.6 else str(value)
            glue = rng.choice(["", " ", " "])  # "x3," continues a word; "x 3," does not
            parts.append(f"{rng.choice(words)}{glue}{number},")
        lines.append(" ".join(parts))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="session")
def digit_comma_spm_model_path(tmp_path_factory, _vocab_corpus_file) -> str:
    """Like `spm_model_path`, but also trained on synthetic lines full of numbers with
    commas, so that it has pieces such as "▁1," and "3," (with and without "▁") that
    trigger the original digit-comma rule. For tests of that rule."""
    numbers = _numbers_file(tmp_path_factory.mktemp("numbers") / "numbers.txt")
    return _train(tmp_path_factory, "numbers", [_vocab_corpus_file, numbers])


@pytest.fixture(scope="session")
def spm_41_path(tmp_path_factory) -> str:
    """A 41-piece ALBERT-convention SentencePiece model: the vocabulary size of the
    tiny TF1 / Hugging Face checkpoints in tests/fixtures (their tokenizer's stand-in),
    trained on lines of 23 short words (deterministic, under a second)."""
    rng = random.Random(0)
    words = ["abc", "bad", "cab", "dab", "face", "bead", "fed", "deaf", "ace", "bee", "add",
             "gag", "hag", "egg", "jig", "kid", "lime", "mild", "nine", "open", "pole",
             "quiz", "rope"]
    path = tmp_path_factory.mktemp("spm41") / "words.txt"
    path.write_text("\n".join(" ".join(rng.choice(words) for _ in range(8))
                              for _ in range(400)) + "\n", encoding="utf-8")
    from albert_tf.training.data.vocab import train_vocab

    model_path, _ = train_vocab([str(path)], str(path.parent / "spm41"), 41,
                                input_sentence_size=0, num_threads=1)
    return model_path


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, spm_model_path) -> str:
    """A tiny pretrained ALBERT saved with `spm_model_path` (random weights): what
    fine-tuning tests start from."""
    from albert_tf import AlbertConfig, AlbertPretrainer, save_checkpoint
    from albert_tf.tokenizer.spm import AlbertTokenizer

    config = AlbertConfig(vocab_size=AlbertTokenizer(spm_model_path).vocab_size,
                          embedding_size=8, hidden_size=12, num_hidden_layers=2,
                          num_attention_heads=3, intermediate_size=20, max_position_embeddings=64)
    path = str(tmp_path_factory.mktemp("pretrained"))
    save_checkpoint(AlbertPretrainer(config), path, spm_model=spm_model_path)
    return path


def pytest_collection_modifyitems(config, items):
    """The longest modules first (tests/helpers/module_order.py)."""
    longest_first(items)
