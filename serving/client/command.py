"""`albert-tf predict`: run an exported model over a file of inputs, write JSONL.

The command line, importing no TensorFlow: `parse` reads it and checks its numbers, and
only then does the CLI import the client (`run.run_command`), so `albert-tf predict
--help` and a usage error answer at once. What it does: `run.py`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from albert_tf import ranges
from albert_tf.infra import arguments

from ..requests import DEFAULT_SIGNATURE, REST_FORMATS

MAX_CONCURRENCY = 64  # threads, each holding a batch and its reply
MAX_RETRIES = 20  # with MAX_WAIT_S between them: minutes, and retry.MAX_TOTAL_WAIT_S caps it
DEFAULT_RETRIES = 5  # retries per request after its first attempt


def parser() -> argparse.ArgumentParser:
    p = arguments.ArgumentParser(prog="albert-tf predict", description=__doc__.split("\n")[0])
    route = p.add_mutually_exclusive_group(required=True)
    route.add_argument("--server", help="TF Serving REST address, e.g. http://localhost:8501")
    route.add_argument("--grpc", help="TF Serving gRPC address, e.g. localhost:8500")
    route.add_argument("--saved-model", help="load this SavedModel locally (BASE/NAME/VERSION, "
                       "or BASE/NAME for its latest version)")
    p.add_argument("--model", default="albert", help="model name on the server (default: albert)")
    p.add_argument("--version", type=int, help="model version on the server (default: latest)")
    p.add_argument("--signature", default=DEFAULT_SIGNATURE, help="signature to call")
    p.add_argument("--input", required=True, help="input file ('-' for stdin)")
    p.add_argument("--input-format", choices=("text", "jsonl"),
                   help="one text per line, or JSON Lines (default: by extension .jsonl/.json)")
    p.add_argument("--output", default="-", help="JSONL output file (default: stdout)")
    p.add_argument("--embeddings", metavar="FILE.npy",
                   help="write each input's mean_pooled sentence embedding as a row of an "
                        "[N, H] float32 .npy file instead of JSONL (an encoder's signatures)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    p.add_argument("--batch-size", type=int, default=32, help="rows per request (default: 32)")
    p.add_argument("--rest-format", choices=REST_FORMATS, default="instances",
                   help="REST body form: row 'instances' or columnar 'inputs'")
    p.add_argument("--concurrency", type=int, default=1, metavar="N",
                   help=f"requests in flight at once, rows still written in input order "
                        f"(default: 1, at most {MAX_CONCURRENCY})")
    p.add_argument("--retries", type=int, default=DEFAULT_RETRIES, metavar="N",
                   help="times a request is asked again after HTTP 429/503, gRPC UNAVAILABLE/"
                        "DEADLINE_EXCEEDED or a refused/reset connection, with jittered "
                        f"exponential backoff (default: {DEFAULT_RETRIES}; 0: never)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds each request may take, whole: connecting, the headers "
                        "and the body (default: 60)")
    return p


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The command line, parsed and its numbers checked, before any work (`--help` exits
    here; a bad option is a UsageError)."""
    args = parser().parse_args(list(argv))
    arguments.require_positive("--batch-size", args.batch_size)
    ranges.check_number("--concurrency", args.concurrency, int,
                        {ranges.MINIMUM: 1, ranges.MAXIMUM: MAX_CONCURRENCY})
    ranges.check_number("--retries", args.retries, int,
                        {ranges.MINIMUM: 0, ranges.MAXIMUM: MAX_RETRIES})
    return args
