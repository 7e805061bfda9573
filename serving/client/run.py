"""`albert-tf predict`: run an exported model over a file of inputs, write JSONL.

Three routes to the same signature: TF Serving's REST API (`--server`), its gRPC
PredictionService (`--grpc`), or the SavedModel loaded in this process
(`--saved-model`). Inputs are one text per line (for signatures with one text
input) or JSON Lines whose keys are the signature's input names, e.g.
`{"question": "...", "context": "..."}`, in UTF-8. Each input row gives one output line,
or with `--embeddings FILE.npy` one row of an [N, H] float32 array: each input's
`mean_pooled` sentence embedding (an encoder's signatures), in input order.

Example:
    albert-tf predict --server http://localhost:8501 --model albert_sst2 \\
        --input reviews.txt --output predictions.jsonl
    albert-tf predict --saved-model exported/albert_encoder --input sentences.txt \\
        --embeddings sentences.npy
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from tqdm import tqdm

from albert_tf.errors import UserError
from albert_tf.infra import atomic, cli, textio

from ..layout import SAVED_MODEL_FILE, existing_versions
from ..requests import (
    ReplyError,
    RequestError,
    columns_from_rows,
)
from . import backends, command, inflight, replies, resume, retry
from .command import DEFAULT_RETRIES

logger = logging.getLogger(__name__)


class ClientError(UserError, RuntimeError):
    """A failure talking to the server or reading the inputs, with one clear message."""



# The output `--embeddings` writes: sentence embeddings [H] per input (serving/signatures).
EMBEDDING_OUTPUT = "mean_pooled"
def output_line(index: int, row: Mapping[str, Any]) -> str:
    """One JSON output line: `replies.INDEX_KEY` first, then the outputs by name in sorted order,
    so its bytes depend on the row's values alone (not on the route's or the server's key
    order, nor on where a resumed run started)."""
    if replies.INDEX_KEY in row:
        raise ClientError(f"the signature has an output named {replies.INDEX_KEY!r}, the key each "
                          "output line gives its input row's position")
    return json.dumps({replies.INDEX_KEY: index, **{name: row[name] for name in sorted(row)}},
                      ensure_ascii=False) + "\n"


# -------------------------------------------------------------------- inputs
def read_rows(path: str, inputs: Mapping[str, Any], jsonl: bool) -> Iterator[dict]:
    """Yields one input row per line of `path` ('-' for stdin).

    Args:
      path: the input file, UTF-8 (`text_lines`).
      inputs: the signature's inputs, name -> NumPy dtype.
      jsonl: JSON Lines (keys = input names; blank lines skipped) rather than one
        text per line.
    """
    if not jsonl and (len(inputs) != 1 or next(iter(inputs.values())) is not object):
        raise ClientError(f"{path}: the signature takes {sorted(inputs)}; give JSON Lines "
                          "with those keys (--input-format jsonl)")
    with _open_input(path) as stream:
        for number, line in text_lines(stream, path):
            if not jsonl:
                yield {next(iter(inputs)): line}
            elif line.strip():
                yield _jsonl_row(path, number, line, inputs)


def text_lines(stream, path: str) -> Iterator[tuple[int, str]]:
    """(line number, text without its line end) of a binary stream, decoded as UTF-8.

    The one way `predict` reads its input (`albert_tf.infra.textio.decode`: a byte-order
    mark at the start is dropped); bytes that are not UTF-8 (a UTF-16 or Latin-1
    file) raise EncodingError naming the file, line and byte rather than reaching
    the model as other text.
    """
    name = "stdin" if path == "-" else path
    offset = 0
    for number, raw in enumerate(stream, 1):
        text = textio.decode(raw, name, line=number, offset=offset)
        offset += len(raw)
        yield number, text.rstrip("\n").rstrip("\r")


def _jsonl_row(path: str, number: int, line: str, inputs: Mapping[str, Any]) -> dict:
    try:
        row = json.loads(line)
    except ValueError as e:
        raise ClientError(f"{path}:{number}: not valid JSON ({e})") from None
    if not isinstance(row, dict) or set(row) != set(inputs):
        keys = sorted(row) if isinstance(row, dict) else type(row).__name__
        raise ClientError(f"{path}:{number}: expected an object with keys {sorted(inputs)}, "
                          f"got {keys}")
    return row


@contextlib.contextmanager
def _open_input(path: str):
    if path == "-":
        yield sys.stdin.buffer
        return
    try:
        stream = open(path, "rb")
    except OSError as e:
        raise ClientError(f"cannot read {path}: {e.strerror}") from None
    with stream:
        yield stream


def batches(rows: Iterator[dict], size: int) -> Iterator[list[dict]]:
    batch: list[dict] = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


# -------------------------------------------------------------------- routes
def make_backend(args: argparse.Namespace):
    """The REST, gRPC or local backend the arguments name (see backends.py)."""

    if args.server:
        return backends.RestBackend(args.server, args.model, args.version, args.rest_format,
                                    args.timeout)
    if args.grpc:
        return backends.GrpcBackend(args.grpc, args.model, args.version, args.timeout)
    return backends.LocalBackend(args.saved_model)


class Plan:
    """How the rows are asked for: `concurrency` requests in flight, each retried up to
    `retries` times (`retry`), the first `skip` input rows left out (written before, see
    `resume`); `retried` counts the retries made."""

    def __init__(self, concurrency: int = 1, retries: int = DEFAULT_RETRIES,
                 skip: int = 0):
        self.concurrency, self.retries, self.skip = concurrency, retries, skip
        self.retried = retry.RetryCounter()


def predict_file(backend, signature: str, input_path: str, output_stream, batch_size: int,
                 jsonl: bool, plan: Plan | None = None) -> int:
    """Streams rows from `input_path` through `signature`; writes one JSON line per row
    (`output_line`), in input order, flushed batch by batch (a killed run keeps every row
    it wrote).

    A batch the model refuses (`RequestError`) is one error naming the file and rows.

    Returns:
      The number of rows written.
    """
    plan, count = plan or Plan(), 0
    for rows in predicted_rows(backend, signature, input_path, batch_size, jsonl, plan):
        first = plan.skip + count
        output_stream.write("".join(output_line(first + i, row) for i, row in enumerate(rows)))
        output_stream.flush()
        count += len(rows)
    return count


def predict_embeddings(backend, signature: str, input_path: str, output: str, batch_size: int,
                       jsonl: bool, plan: Plan | None = None) -> int:
    """Writes each input's `mean_pooled` embedding as one row of an [N, H] float32 .npy
    file at `output` (atomically); returns N. ClientError when the signature has none."""
    outputs = backend.signatures().get(signature, {}).get("outputs", ())
    if outputs and EMBEDDING_OUTPUT not in outputs:
        raise ClientError(f"--embeddings: signature {signature!r} has no {EMBEDDING_OUTPUT} "
                          f"output (it has {', '.join(sorted(outputs))}); sentence embeddings "
                          "come from an encoder's signatures (export --task encoder)")
    embeddings = [row[EMBEDDING_OUTPUT] for rows in predicted_rows(
        backend, signature, input_path, batch_size, jsonl, plan) for row in rows]
    if not embeddings:  # H is known from a reply only: an [0, ?] array would be a guess
        raise ClientError(f"--input {input_path}: no inputs, so no embeddings to write to "
                          f"{output} (give at least one text)")
    array = np.asarray(embeddings, np.float32).reshape(len(embeddings), -1)  # [N, H]
    with atomic.atomic_write(output, mode="wb", encoding=None) as stream:
        np.save(stream, array)
    return len(embeddings)


def predicted_rows(backend, signature: str, input_path: str, batch_size: int,
                   jsonl: bool, plan: Plan | None = None) -> Iterator[list[dict]]:
    """Each batch's checked reply rows, in input order (see `predict_file`)."""
    plan = plan or Plan()
    inputs, specs = signature_io(backend, signature, plan)

    def ask(numbered: tuple[int, list[dict]]) -> list[dict]:
        first, batch = numbered
        where = f"{input_path}: rows {first}-{first + len(batch) - 1}"
        try:
            rows = retry.with_retries(
                lambda: backend.predict(signature, columns_from_rows(batch, inputs)),
                plan.retries, plan.retried)
            if isinstance(rows, list) and len(rows) != len(batch):
                # a short reply must not pass as complete output
                raise backends.ServerError(f"{backend.where}: {where}: the server returned "
                                           f"{len(rows)} predictions for {len(batch)} "
                                           "inputs; no output was kept")
            return replies.check_rows(rows, specs, len(batch))  # before any is written
        except RequestError as e:
            raise ClientError(f"{where}: {e}") from None
        except ReplyError as e:
            raise backends.ServerError(f"{backend.where}: {where}: the server's reply does "
                                       f"not fit signature {signature!r}: {e}; no output "
                                       "was kept") from None

    rows_left = itertools.islice(read_rows(input_path, inputs, jsonl), plan.skip, None)
    numbered = _numbered(batches(rows_left, batch_size), plan.skip + 1)
    with tqdm(unit=" rows", disable=None, file=sys.stderr, initial=plan.skip) as progress:
        for (_, batch), rows in inflight.in_order(ask, numbered, plan.concurrency):
            yield rows
            progress.update(len(batch))


def signature_io(backend, signature: str, plan: Plan) -> tuple[dict, dict]:
    """(inputs {name: dtype}, output specs {name: (dtype, rank)}) of `signature`."""
    signatures = retry.with_retries(backend.signatures, plan.retries, plan.retried)
    if signature not in signatures:
        raise ClientError(f"the model has no signature {signature!r}; it has "
                          f"{', '.join(sorted(signatures))}")
    inputs = signatures[signature]["inputs"]
    specs = signatures[signature].get("output_specs") or {
        name: (None, None) for name in signatures[signature]["outputs"]}
    return inputs, specs


def count_rows(path: str, jsonl: bool) -> int:
    """How many rows `read_rows` reads from `path` (a JSON Lines file's blank lines none)."""
    with _open_input(path) as stream:
        return sum(1 for _, line in text_lines(stream, path) if not jsonl or line.strip())


def _numbered(groups: Iterator[list[dict]], first: int) -> Iterator[tuple[int, list[dict]]]:
    """(1-based input row number of its first row, batch) for each batch."""
    for batch in groups:
        yield first, batch
        first += len(batch)


@contextlib.contextmanager
def _open_output(path: str, overwrite: bool = False):
    """stdout, or a file written under a temporary name and renamed when complete (a file
    that appeared meanwhile replaced only with --overwrite)."""
    if path == "-":
        yield sys.stdout
        return
    with atomic.atomic_write(path, replace=overwrite) as stream:
        yield stream


# ----------------------------------------------------------------------- CLI
def check_paths(input_path: str, output: str, overwrite: bool = False) -> None:
    """Refuses, before any model is loaded or called, an input that is not a UTF-8 text
    file and an output that cannot be written, is the input itself, or exists (unless
    `overwrite`).

    Raises:
      ClientError / EncodingError / UserError: one line naming the option and the path.
    """
    if input_path != "-":
        if os.path.isdir(input_path):
            raise ClientError(f"--input {input_path} is a directory; give a file of inputs")
        if not os.path.lexists(input_path):
            raise ClientError(f"--input {input_path}: no such file")
        textio.check_file(input_path)  # the one size rule: no /dev/zero, FIFO or 5 GB file
        with _open_input(input_path) as stream:
            for _ in text_lines(stream, input_path):  # every line decodes, or one error
                pass
    if output == "-" or "://" in output:  # stdout; a remote file system checks its own
        return
    if os.path.isdir(output):
        raise ClientError(f"--output {output} is a directory; give a file name")
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        what = "is not a directory" if os.path.exists(parent) else "does not exist"
        raise ClientError(f"--output {output}: its directory {parent} {what}")
    atomic.check_writable_directory(parent, "--output directory")
    if input_path != "-":
        atomic.check_not_input(output, [("--input file", input_path)], "--output",
                               "writing the predictions would replace it")
    atomic.check_replaceable(output, replace=overwrite, option="--output", flag="--overwrite",
                             error=ClientError)  # the one rule for an existing output


def _saved_model_path(path: str) -> str:
    """The SavedModel directory --saved-model names (BASE/NAME: its latest version)."""
    if not os.path.lexists(path):
        raise ClientError(f"--saved-model {path}: no such directory")
    if not os.path.isdir(path):
        raise ClientError(f"--saved-model {path} is a file; give the SavedModel's directory "
                          "(the one holding saved_model.pb) or BASE/NAME")
    path = _latest_version(path)
    if not os.path.isfile(os.path.join(path, SAVED_MODEL_FILE)):
        raise ClientError(f"--saved-model {path} is not a SavedModel directory (no "
                          "saved_model.pb) nor BASE/NAME with numbered versions")
    return path


def _latest_version(path: str) -> str:
    """BASE/NAME -> its highest BASE/NAME/VERSION, as TF Serving would serve; else `path`."""

    if os.path.isfile(os.path.join(path, SAVED_MODEL_FILE)) or not os.path.isdir(path):
        return path
    versions = existing_versions(path)
    return os.path.join(path, str(versions[-1])) if versions else path


def run_command(args: argparse.Namespace) -> int:
    """`albert-tf predict` with its parsed arguments (`command.parser`)."""
    replies.check_route(args.server, args.grpc, args.timeout, args.version)
    jsonl = (args.input_format == "jsonl" if args.input_format
             else args.input.endswith((".jsonl", ".json")))
    if args.saved_model:
        args.saved_model = _saved_model_path(args.saved_model)
    if args.embeddings is not None and args.output != "-":
        raise ClientError("give --output (JSONL) or --embeddings (.npy), not both")
    if args.embeddings is not None and (args.embeddings == "-" or "://" in args.embeddings):
        raise ClientError(f"--embeddings {args.embeddings}: give a local file name")
    check_paths(args.input, args.embeddings or args.output, args.overwrite)
    cli.setup_logging()
    backend = make_backend(args)
    plan = Plan(args.concurrency, args.retries)
    if args.embeddings is not None:
        count = predict_embeddings(backend, args.signature, args.input, args.embeddings,
                                   args.batch_size, jsonl, plan)
        logger.info("wrote %d embeddings to %s%s", count, args.embeddings, _retried(plan))
        return 0
    if args.input == "-" or args.output == "-" or "://" in args.output:  # nothing to resume
        with _open_output(args.output, args.overwrite) as stream:
            count = predict_file(backend, args.signature, args.input, stream,
                                 args.batch_size, jsonl, plan)
    else:
        record = resume.run_record(args.input, _row_options(args, jsonl))
        written = resume.Written(count_rows(args.input, jsonl),
                                 signature_io(backend, args.signature, plan)[1])
        with resume.resumable_output(args.output, record, args.overwrite,
                                     written) as (stream, done):
            plan.skip = done
            count = done + predict_file(backend, args.signature, args.input, stream,
                                        args.batch_size, jsonl, plan)
    logger.info("wrote %d predictions to %s%s", count, args.output, _retried(plan))
    return 0


def _row_options(args: argparse.Namespace, jsonl: bool) -> dict:
    """The options that change an output row: a partial output of other ones is not
    continued (`resume`). The address, batch size and concurrency do not."""
    model = args.saved_model and os.path.realpath(args.saved_model) or args.model
    return {"signature": args.signature, "model": model, "version": args.version,
            "input_format": "jsonl" if jsonl else "text"}


def _retried(plan: Plan) -> str:
    count = plan.retried.count
    return f" ({count} request{'s' if count != 1 else ''} retried)" if count else ""

@cli.command("predict")
def main(argv: Sequence[str] | None = None) -> int:
    return run_command(command.parse(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
