"""Docs, docstrings and comments name files and modules that exist.

A file is renamed or split and the lines that pointed readers to it keep the old name:
every `*.py` path written in a tracked .py or .md file must be a file of the repository
(by its path, or by its name when written without a folder), and every backticked dotted
name that starts with albert_tf must be a module, or a name a module defines. Files of other projects that
the code cites as references (the original ALBERT's, transformers', Keras') are listed in
FOREIGN; the corpus modules' examples of source-file names are not references.
"""

from __future__ import annotations

import os
import re
import subprocess

from tests.helpers.paths import REPO

# Files of other projects the code cites: the original ALBERT / BERT, transformers, Model
# Garden, KerasHub, Keras (by name, or under a foreign folder).
FOREIGN = {"tokenization.py", "modeling.py", "run_pretraining.py",
           "create_pretraining_data.py", "run_race.py", "download_glue_data.py",
           "lamb_optimizer.py", "tf2_albert_encoder_checkpoint_converter.py",
           "albert_presets.py", "run_squad_v1.py", "run_squad_v2.py", "modeling_albert.py",
           "run_classifier.py", "optimization.py", "run_glue.py", "run_ner.py"}
FOREIGN_FOLDERS = ("keras/src/",)
# The embedded corpus names source files as examples of what it reads.
CORPUS_FILES = {"docs/corpus.md", "training/data/embedded.py", "training/data/split.py",
                "tests/training/data/test_embedded.py", "tests/training/data/test_split.py"}
# A path: folders, then a file name ending in .py; not a fragment of a glob (*_test.py) or of a longer name.
PATH = re.compile(r"(?<![\w/.*-])((?:[\w.-]+/)*[\w-]+\.py)\b")
DOTTED = re.compile(r"`(albert_tf(?:\.[A-Za-z_]\w*)+)")


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    return [f for f in out.splitlines() if os.path.exists(os.path.join(REPO, f))]


def _texts(files):
    for name in files:
        if name.endswith((".py", ".md")) and not name.startswith("tests/data/real/"):
            with open(os.path.join(REPO, name), encoding="utf-8") as f:
                yield name, f.read().splitlines()


def _exists(reference: str, files: set[str], names: set[str]) -> bool:
    if "/" not in reference:
        return reference in names
    # albert_tf.training / albert_tf.serving are the training/ and serving/ folders
    bare = re.sub(r"^albert_tf/(training|serving)/", r"\1/", reference.lstrip("./"))
    return any(f == bare or f.endswith("/" + bare) for f in files)


def test_every_file_a_text_names_exists():
    files = _tracked()
    tracked, names = set(files), {os.path.basename(f) for f in files}
    stale = []
    for name, lines in _texts(files):
        if name in CORPUS_FILES:
            continue
        for number, line in enumerate(lines, 1):
            for match in PATH.finditer(line):
                reference = match.group(1)
                if os.path.basename(reference) in FOREIGN or reference.startswith(
                        FOREIGN_FOLDERS) or _exists(reference, tracked, names):
                    continue
                stale.append(f"{name}:{number}: {reference}")
    assert stale == []


def _module(parts: list[str]) -> tuple[str | None, list[str]]:
    """The source file of the longest module prefix of `parts`, and the rest."""
    base = parts[1:] if len(parts) > 1 and parts[1] in ("training", "serving") else parts
    for n in range(len(base), 0, -1):
        path = os.path.join(REPO, *base[:n])
        for candidate in (path + ".py", os.path.join(path, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate, base[n:]
    return None, base


def test_every_dotted_albert_tf_name_a_text_gives_exists():
    stale = []
    for name, lines in _texts(_tracked()):
        for number, line in enumerate(lines, 1):
            for match in DOTTED.finditer(line):
                path, rest = _module(match.group(1).split("."))
                if path is None:
                    stale.append(f"{name}:{number}: {match.group(1)} (no such module)")
                    continue
                if not rest:
                    continue
                with open(path, encoding="utf-8") as f:
                    source = f.read()
                # defined, assigned, imported, or a lazy attribute ("Name": "module")
                defined = (rf"^\s*(def|class)\s+{rest[0]}\b|^\s*{rest[0]}\b[^=\n]*=|"
                           rf"import.*\b{rest[0]}\b|^\s+{rest[0]},|[\"']{rest[0]}[\"']")
                if not re.search(defined, source, re.M):
                    stale.append(f"{name}:{number}: {match.group(1)} ({rest[0]} is not in "
                                 f"{os.path.relpath(path, REPO)})")
    assert stale == []
