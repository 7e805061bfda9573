"""`albert-tf`: the command table, and the wrapper that turns errors into one line.

Each subcommand lives in its own module with a `main(argv)`; `COMMANDS` names it
as data and `main` imports it only when its command is run, so `albert-tf params`
does not pay for TensorFlow's start-up (and this module imports no room of the
package statically). A command whose job imports TensorFlow has its command line in
a module of its own (`COMMAND_LINES`), parsed before the job is imported. `command(NAME)` wraps a command's `main`: a `UserError` (and
a file-system error naming its path) becomes `albert-tf NAME: message` on stderr
and exit status 2; anything else status 1 with a hint to rerun with `--debug`.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import importlib
import logging
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable

from albert_tf.errors import UserError, shown
from albert_tf.infra import arguments, tf_startup

DEBUG_ENV = "ALBERT_TF_DEBUG"
# The most characters of an unexpected error's first line printed (a library may echo a
# whole input in it); --debug shows all.
UNEXPECTED_SHOWN_CHARS = 500
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


COMMANDS = {
    # name: (module, one-line help)
    "demo": ("albert_tf.training.experiments.demo.run", "the whole job on the embedded corpus: vocab -> data -> pretrain -> export -> answers"),
    "vocab": ("albert_tf.training.data.vocab", "train a SentencePiece vocabulary with ALBERT's conventions"),
    "create-data": ("albert_tf.training.data.create_data", "write SOP (or NSP) + n-gram-masked pretraining TFRecords"),
    "pretrain": ("albert_tf.training.pretrain.run", "pretrain with model.fit under a distribution strategy"),
    "finetune": ("albert_tf.training.finetune.run", "fine-tune on GLUE, SQuAD, RACE or your own files"),
    "export": ("albert_tf.serving.export", "export a SavedModel with raw-text signatures for TF Serving"),
    "serving-check": ("albert_tf.serving.serving_check", "load an export in a tensorflow/serving release's TensorFlow and compare its warmup answers"),
    "predict": ("albert_tf.serving.client.run", "query TF Serving (REST/gRPC) or a local SavedModel"),
    "convert": ("albert_tf.checkpoint.convert", "convert a checkpoint of any format it reads to albert-tf's, Hugging Face's or KerasHub's"),
    "params": ("albert_tf.params", "print parameter counts of the paper's configurations"),
    "presets": ("albert_tf.checkpoint.released", "list the released ALBERT checkpoints and their hub handles"),
    "ablate": ("albert_tf.training.experiments.ablate.run", "rerun the paper's ablations (sharing, E, NSP/SOP, dropout): tables + plots"),
}

# The commands whose job imports TensorFlow: their command line is read first by
# `parse(argv)` of a module that imports none (so `--help` and a usage error answer at
# once), then the job's module runs `run_command(parsed)`.
COMMAND_LINES = {
    "demo": "albert_tf.training.experiments.demo.command",
    "create-data": "albert_tf.training.data.create_data_command",
    "pretrain": "albert_tf.training.pretrain.command",
    "finetune": "albert_tf.training.finetune.command",
    "export": "albert_tf.serving.export_command",
    "serving-check": "albert_tf.serving.check_command",
    "predict": "albert_tf.serving.client.command",
    "ablate": "albert_tf.training.experiments.ablate.command",
}


def debug_enabled() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def set_debug(enabled: bool) -> None:
    """`--debug`: tracebacks instead of one-line errors (also for child processes)."""
    if enabled:
        os.environ[DEBUG_ENV] = "1"


def _os_error_line(e: OSError) -> str:
    where = e.filename if e.filename is not None else ""
    if getattr(e, "filename2", None):
        where = f"{where} -> {e.filename2}"
    reason = e.strerror or str(e)
    return f"{where}: {reason}" if where else reason


def _user_facing(e: BaseException) -> str | None:
    """The one-line message of an error the user can act on, else None."""
    if isinstance(e, UserError):
        return str(e)
    if isinstance(e, (FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError,
                      NotADirectoryError)):
        return _os_error_line(e) if e.filename is not None else str(e)
    if isinstance(e, OSError) and (e.filename is not None or e.errno in (
            errno.ENOSPC, errno.EACCES, errno.EROFS, errno.EDQUOT, errno.ENOENT)):
        return _os_error_line(e)
    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(e, (tf.errors.NotFoundError, tf.errors.PermissionDeniedError,
                                         tf.errors.DataLossError, tf.errors.ResourceExhaustedError)):
        # TensorFlow's file errors carry the path in their message; keep its first line.
        return f"{type(e).__name__}: {str(e.message).strip().splitlines()[0]}"
    return None


# Control characters in a message (a path holding a newline, an escape sequence) are
# printed escaped, so the error stays one line and cannot rewrite the terminal.
_ESCAPES = {code: ascii(chr(code))[1:-1] for code in (*range(0x20), 0x7f)}


def one_line(text: str) -> str:
    """`text` with its control characters escaped (a newline in a path prints as \\n)."""
    return text.translate(_ESCAPES)


class _LineEnds:
    """sys.stdout while a command runs: it remembers whether the last write ended its line.

    Keras' progress bar redraws its line with "\r" and ends it only when an epoch
    ends, so an error printed mid-epoch would be glued to it (stdout and stderr on
    one terminal or log); `print_error` ends such a line first.
    """

    def __init__(self, stream):
        self._stream = stream
        self.line_open = False

    def write(self, text: str) -> int:
        if text:
            self.line_open = not text.endswith("\n")
        return self._stream.write(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name):  # isatty, flush, encoding, fileno: the stream's own
        return getattr(self._stream, name)


@contextlib.contextmanager
def _tracking_line_ends():
    """Routes sys.stdout through `_LineEnds` while a command runs (once, when nested)."""
    previous = sys.stdout
    if previous is None or isinstance(previous, _LineEnds):
        yield
        return
    sys.stdout = _LineEnds(previous)
    try:
        yield
    finally:
        if isinstance(sys.stdout, _LineEnds):
            sys.stdout = previous


def end_open_line() -> None:
    """Ends the line a progress bar left open on stdout, if any."""
    stdout = sys.stdout
    if isinstance(stdout, _LineEnds) and stdout.line_open:
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stdout
            stdout.write("\n")
            stdout.flush()


def print_error(line: str) -> None:
    """Prints `line` on stderr on a line of its own: an open progress line is ended first."""
    end_open_line()
    print(line, file=sys.stderr)


def report_error(name: str, e: BaseException) -> int:
    """Prints one line for `e` on stderr; returns the exit status (2: user error, 1: bug)."""
    message = _user_facing(e)
    if message is not None:
        print_error(f"albert-tf {name}: {one_line(message)}")
        return getattr(e, "exit_status", 2)
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    print_error(f"albert-tf {name}: unexpected error: {type(e).__name__}"
                f"{': ' + shown(first, UNEXPECTED_SHOWN_CHARS) if first else ''} (rerun with "
                "--debug for the "
                "traceback)")
    return 1


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread between two Python steps (never inside a file
    write or a checkpoint save), so that clean-ups run as on Ctrl-C."""


# Set by the SIGTERM handler while a command runs. A library may turn the `Terminated`
# raised inside its Python callbacks into an error of its own (TensorFlow's tracing and
# conversions, a C extension's status), or an interrupted system call into a failed
# write; the command still ends as terminated (exit 143), never as that error.
_terminated = threading.Event()


# Depth of the `termination_deferred` blocks running in the main thread: while above 0,
# SIGTERM only sets `_terminated`, and the outermost block raises `Terminated` as it ends.
_deferring = 0


def _terminate(signum, frame):
    _terminated.set()
    if not _deferring:
        raise Terminated()


@contextlib.contextmanager
def termination_deferred():
    """SIGTERM waits until the block ends: for work that must finish whole, such as a
    checkpoint save whose library leaves a half-written directory when interrupted.
    A SIGTERM that came during the block raises `Terminated` once it ends."""
    global _deferring
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = _terminated.is_set()
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
    if not _deferring and not before and _terminated.is_set():
        raise Terminated()


@contextlib.contextmanager
def _sigterm_as_exception():
    """SIGTERM raises `Terminated` in the main thread while a command runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _terminated.clear()
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def command(name: str) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """Decorates a command's `main(argv)`: errors become one line on stderr and a status.

    UserError (and file-system errors naming their path) -> status 2; anything
    else -> status 1 with a hint; with `--debug` (ALBERT_TF_DEBUG=1) the
    traceback is printed in full instead.
    """
    def wrap(main: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(main)
        def run(*args, **kwargs) -> int:
            with _tracking_line_ends():
                try:
                    with _sigterm_as_exception():
                        return int(main(*args, **kwargs) or 0)
                except Terminated:  # what was complete (files, checkpoints) is kept
                    print_error(f"albert-tf {name}: terminated (SIGTERM)")
                    return 128 + signal.SIGTERM
                except KeyboardInterrupt:
                    print_error(f"albert-tf {name}: interrupted")
                    return 130
                except Exception as e:  # noqa: BLE001 - the one place errors become statuses
                    if _terminated.is_set() and not debug_enabled():  # the error SIGTERM caused
                        print_error(f"albert-tf {name}: terminated (SIGTERM)")
                        return 128 + signal.SIGTERM
                    if debug_enabled():
                        end_open_line()
                        traceback.print_exc()
                        return (getattr(e, "exit_status", 2) if _user_facing(e) is not None
                                else 1)
                    return report_error(name, e)
        return run
    return wrap


def setup_logging(level: int = logging.INFO) -> None:
    """One log format for every command (INFO by default; DEBUG with --debug)."""
    logging.basicConfig(level=logging.DEBUG if debug_enabled() else level, format=LOG_FORMAT,
                        datefmt="%H:%M:%S")
    # TensorFlow gives its logger a handler of its own when it is first asked for before the
    # root logger has one; its records also reach ours, so each line ("Assets written to:
    # ...") would print twice. Ours alone prints them.
    tensorflow = logging.getLogger("tensorflow")
    for handler in list(tensorflow.handlers):
        tensorflow.removeHandler(handler)


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: albert-tf COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "Run 'albert-tf COMMAND --help' for a command's options.",
              "--debug (anywhere): show the traceback of an error instead of one line."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--debug" in argv:
        argv = [a for a in argv if a != "--debug"]
        set_debug(True)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"albert-tf: unknown command {name!r}{arguments.suggestion(name, COMMANDS)}"
              f"\n\n{_usage()}", file=sys.stderr)
        return 2
    if not debug_enabled():
        # TensorFlow's C++ start-up chatter (oneDNN, CUDA probes) is not for command-line
        # users: set before TensorFlow is first imported (here, once, for every command).
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        tf_startup.quiet_tensorflow_import()
    # Every command reports errors the same way: one line (see `command`).
    return command(name)(_run)(name, rest)


def _run(name: str, argv: list[str]) -> int:
    job = COMMANDS[name][0]
    if name in COMMAND_LINES:
        parsed = importlib.import_module(COMMAND_LINES[name]).parse(argv)
        return int(importlib.import_module(job).run_command(parsed) or 0)
    return int(importlib.import_module(job).main(argv) or 0)


if __name__ == "__main__":
    # `python -m albert_tf.infra.cli` runs this file as a second module, `__main__`; the
    # commands import `albert_tf.infra.cli` and read its SIGTERM state
    # (`termination_deferred`), so the handler must be that module's, not this copy's.
    from albert_tf.infra import cli as _imported
    sys.exit(_imported.main())
