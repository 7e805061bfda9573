"""`albert-tf vocab`: train a SentencePiece vocabulary the way ALBERT's 30k-clean.model was.

The flags follow the original README's `spm_train` command: a unigram model with
`<pad>`=0, `<unk>`=1, control symbols [CLS]=2, [SEP]=3, [MASK]=4, no BOS/EOS,
the user-defined symbols ( ) " - . – £ € (ids 5-12), character coverage
0.99995 and input sentence sampling with shuffling. Every input line is first
normalised exactly as `AlbertTokenizer.normalize` does (so a do_lower_case
vocabulary is lowercase). Input: text files, one sentence per line (blank
lines are skipped), given as paths or globs, plain or gzip (`.gz`).
`--model-type wordpiece` learns a BERT-style PREFIX.txt instead (`wordpiece_vocab.py`).

Example:
  albert-tf vocab --input 'corpus/*.txt.gz' --output vocab/30k-clean --vocab-size 30000
"""

from __future__ import annotations

import argparse
import errno
import itertools
import logging
import os
import time
from collections.abc import Iterator, Sequence

import sentencepiece as spm

from albert_tf.errors import UserError
from albert_tf.infra import arguments, atomic, cli
from albert_tf.tokenizer.spm import (
    CONTROL_SYMBOLS,
    PAD_PIECE,
    UNK_PIECE,
    USER_DEFINED_SYMBOLS,
    AlbertTokenizer,
)

from .vocab_inputs import VocabError, expand_inputs, read_sentences  # noqa: F401 - the command's names

logger = logging.getLogger(__name__)

DEFAULT_CHARACTER_COVERAGE = 0.99995
DEFAULT_INPUT_SENTENCE_SIZE = 10_000_000
_NUM_META_PIECES = 2 + len(CONTROL_SYMBOLS) + len(USER_DEFINED_SYMBOLS)
MODEL_TYPES = ("unigram", "wordpiece")  # --model-type; wordpiece: wordpiece_vocab.py
OUTPUT_SUFFIXES = (".model", ".vocab")  # PREFIX.model, PREFIX.vocab



def train_vocab(inputs: Sequence[str], output_prefix: str, vocab_size: int, *,
                do_lower_case: bool = True, keep_accents: bool = False,
                character_coverage: float = DEFAULT_CHARACTER_COVERAGE,
                input_sentence_size: int = DEFAULT_INPUT_SENTENCE_SIZE,
                num_threads: int | None = None, overwrite: bool = False) -> tuple[str, str]:
    """Trains an ALBERT SentencePiece model; writes `{output_prefix}.model` and `.vocab` atomically.

    Existing `.model` / `.vocab` files are replaced only with `overwrite` (checked before
    the corpus is read: every dataset and checkpoint made with a vocabulary needs it).

    Args:
      inputs: text files or globs (plain or .gz), one sentence per line.
      output_prefix: path prefix of the two output files (its folder is created).
      vocab_size: number of pieces, the 13 special and user-defined ones included.
      do_lower_case, keep_accents: the normalisation the tokenizer will apply.
      character_coverage: fraction of characters covered by the vocabulary.
      input_sentence_size: sample at most this many lines (0: all of them).
      num_threads: trainer threads (default: all CPUs).
      overwrite: replace existing output files (`--overwrite`).

    Returns:
      (model_path, vocab_path).
    """
    _check_options(vocab_size, character_coverage, input_sentence_size)
    for suffix in OUTPUT_SUFFIXES:  # the one rule for an existing output
        atomic.check_replaceable(output_prefix + suffix, replace=overwrite, option="--output",
                                 flag="--overwrite", error=VocabError)
    out_dir = os.path.dirname(os.path.abspath(output_prefix))
    # Before the corpus is read, and so that no error names the hidden temporary files.
    atomic.check_writable_directory(out_dir, "--output's directory")
    files = expand_inputs(inputs)
    stats: dict = {}
    sentences = read_sentences(files, do_lower_case, keep_accents, stats)
    first = next(sentences, None)
    if first is None:
        raise VocabError(f"the corpus is empty: no non-blank line in {', '.join(files)}")
    os.makedirs(out_dir, exist_ok=True)
    tmp_prefix = atomic.temporary_path(os.path.join(out_dir, os.path.basename(output_prefix)))
    start = time.monotonic()
    try:
        _run_trainer(itertools.chain([first], sentences), tmp_prefix, output_prefix,
                     vocab_size, character_coverage, input_sentence_size, num_threads)
        _check_written(tmp_prefix, output_prefix)
        _publish_pair(tmp_prefix, output_prefix, overwrite)
    finally:
        for suffix in (".model", ".vocab"):
            if os.path.exists(tmp_prefix + suffix):
                os.remove(tmp_prefix + suffix)
    logger.info("trained a %d-piece vocabulary on %d lines (%d characters) from %d file(s) in "
                "%.1f s: %s.model", vocab_size, stats["lines"], stats["characters"], len(files),
                time.monotonic() - start, output_prefix)
    return output_prefix + ".model", output_prefix + ".vocab"


def _publish_pair(tmp_prefix: str, output_prefix: str, overwrite: bool) -> None:
    """Puts the finished `.vocab` and `.model` under their names: both or neither
    (`atomic.commit_group`); the `.model` appears last, so a kill between the renames leaves
    no `.model` beside a `.vocab` that does not match it (readers open the `.model`)."""
    atomic.commit_group([(tmp_prefix + suffix, output_prefix + suffix)
                         for suffix in (".vocab", ".model")], replace=overwrite)


def _check_options(vocab_size: int, character_coverage: float, input_sentence_size: int) -> None:
    if vocab_size <= _NUM_META_PIECES:
        raise VocabError(f"vocab_size={vocab_size} must exceed the {_NUM_META_PIECES} special and "
                         f"user-defined pieces")
    if not 0.0 < character_coverage <= 1.0:
        raise VocabError(f"character_coverage={character_coverage} must be in (0, 1]")
    if input_sentence_size < 0:
        raise VocabError(f"input_sentence_size={input_sentence_size} must be >= 0 (0: all lines)")


def _run_trainer(sentences: Iterator[str], model_prefix: str, output_prefix: str,
                 vocab_size: int, character_coverage: float, input_sentence_size: int,
                 num_threads: int | None) -> None:
    """Trains into the temporary `model_prefix`; errors name `output_prefix`."""
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=sentences, model_prefix=model_prefix, model_type="unigram",
            vocab_size=vocab_size, character_coverage=character_coverage,
            input_sentence_size=input_sentence_size, shuffle_input_sentence=True,
            pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece=PAD_PIECE, unk_piece=UNK_PIECE,
            control_symbols=list(CONTROL_SYMBOLS), user_defined_symbols=list(USER_DEFINED_SYMBOLS),
            num_threads=num_threads or os.cpu_count() or 1,
            # SentencePiece logs its own progress (EM rounds, pruning) to stderr.
            minloglevel=0 if logger.isEnabledFor(logging.INFO) else 1)
    except RuntimeError as err:  # e.g. "Vocabulary size is too high (1000). ... <= 532."
        raise _trainer_failure(str(err).strip(), model_prefix, output_prefix) from None


def _trainer_failure(message: str, tmp_prefix: str, output_prefix: str) -> VocabError:
    """SentencePiece's error as one line naming the user's output, never its hidden name.

    A refused write is reported by SentencePiece as the C++ call that failed
    ("INTERNAL: ... [output->WriteLine(...)]"), without the OS's reason: that reason is
    asked of the file system (`_refused_write_reason`)."""
    if "->Write" in message:
        suffix = ".vocab" if "WriteLine" in message else ".model"
        reason = _refused_write_reason(tmp_prefix + suffix) or "the write failed"
        return VocabError(f"cannot write {output_prefix}{suffix}: {reason}; nothing was "
                          "written")
    return VocabError("SentencePiece training failed: "
                      f"{message.replace(tmp_prefix, output_prefix)}")


def _refused_write_reason(path: str) -> str | None:
    """Why the file system refuses writes to `path` (a temporary this run made): no free
    block is ENOSPC; else the error of appending 1 MiB to it (ENOSPC, EDQUOT, EFBIG past a
    file-size limit); None when the append succeeds. The file is removed afterwards."""
    if os.statvfs(os.path.dirname(os.path.abspath(path))).f_bavail == 0:
        return os.strerror(errno.ENOSPC)
    try:  # never through a link: only the file SentencePiece wrote is appended to
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        for _ in range(16):
            os.write(fd, bytes(1 << 16))
        os.fsync(fd)
    except OSError as e:
        return e.strerror
    finally:
        os.close(fd)
    return None


def _check_written(tmp_prefix: str, output_prefix: str) -> None:
    """The trained model reads back with ALBERT's conventions. SentencePiece's trainer
    reports no failed write (a full disk leaves a truncated file), so a model that does
    not read back is named as the output it was to become, never its hidden name."""
    try:
        _check_conventions(tmp_prefix + ".model")
    except UserError as e:
        reason = (_refused_write_reason(tmp_prefix + ".model")
                  or str(e).replace(tmp_prefix, output_prefix).splitlines()[0])
        raise VocabError(f"cannot write {output_prefix}.model: {reason}; nothing was "
                         "written") from None


def _check_conventions(model_path: str) -> None:
    tokenizer = AlbertTokenizer(model_path)
    got = [tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id,
           tokenizer.mask_id]
    if got != [0, 1, 2, 3, 4] or tokenizer.sp_model.bos_id() != -1:
        raise RuntimeError(f"trained model breaks ALBERT's id conventions: {got}")


def _parser() -> argparse.ArgumentParser:
    p = arguments.ArgumentParser(prog="albert-tf vocab", description=__doc__.split("\n\n")[0])
    p.add_argument("--model-type", choices=MODEL_TYPES, default=MODEL_TYPES[0],
                   help="unigram: a SentencePiece PREFIX.model (ALBERT's English models); "
                   "wordpiece: a BERT-style PREFIX.txt (the Chinese ALBERT models; "
                   "wordpiece_vocab.py) (default: %(default)s)")
    p.add_argument("--input", action="append", required=True, metavar="GLOB",
                   help="text file(s), one sentence per line; plain or .gz; repeatable")
    p.add_argument("--output", required=True, metavar="PREFIX",
                   help="writes PREFIX.model and PREFIX.vocab (wordpiece: PREFIX.txt)")
    p.add_argument("--vocab-size", type=int, required=True, help="e.g. 30000")
    p.add_argument("--cased", "--no-lower-case", dest="do_lower_case", action="store_false",
                   help="keep case (for a cased tokenizer, do_lower_case=False)")
    p.add_argument("--keep-accents", action="store_true",
                   help="skip NFKD and keep combining marks (tokenizer keep_accents=True)")
    p.add_argument("--character-coverage", type=float, default=DEFAULT_CHARACTER_COVERAGE,
                   help="default: %(default)s, as the original")
    p.add_argument("--input-sentence-size", type=int, default=DEFAULT_INPUT_SENTENCE_SIZE,
                   help="sample at most this many lines; 0: all (default: %(default)s)")
    p.add_argument("--num-threads", type=int, default=None, help="default: all CPUs")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing PREFIX.model / PREFIX.vocab")
    return p


@cli.command("vocab")
def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exit_:  # --help
        return int(exit_.code or 0)
    if args.num_threads is not None:
        arguments.require_positive("--num-threads", args.num_threads, " (omit it to use all CPUs)")
    cli.setup_logging()
    if args.model_type == "wordpiece":
        return _main_wordpiece(args)
    model_path, vocab_path = train_vocab(
        args.input, args.output, args.vocab_size, do_lower_case=args.do_lower_case,
        keep_accents=args.keep_accents, character_coverage=args.character_coverage,
        input_sentence_size=args.input_sentence_size, num_threads=args.num_threads,
        overwrite=args.overwrite)
    logger.info("wrote %s and %s", model_path, vocab_path)
    return 0


def _main_wordpiece(args: argparse.Namespace) -> int:
    from .wordpiece_vocab import train_wordpiece_vocab  # it imports this module

    if args.keep_accents:
        raise VocabError("--keep-accents is SentencePiece's option; WordPiece strips accents "
                         "exactly when it lower-cases (pass --cased to keep both)")
    path = train_wordpiece_vocab(args.input, args.output, args.vocab_size,
                                 do_lower_case=args.do_lower_case, overwrite=args.overwrite)
    logger.info("wrote %s", path)
    return 0
