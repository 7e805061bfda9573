"""The embedded corpus's readers and de-duplication (training/data/embedded.py, dedup.py).

Everything here runs on small packages the tests write themselves (never on all of
TensorFlow): a fake package directory put on sys.path, found with `find_spec`
like the real ones and never imported.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap

import pytest

from albert_tf.training.data import dedup, embedded

# Prose written for these tests: each paragraph has several distinct sentences.
ORIGINAL = [
    "The harbour master keeps a ledger of every ship that enters the bay.",
    "Each entry records the name of the vessel, its cargo and the hour of arrival.",
    "Ships that carry timber are sent to the northern quay for unloading.",
    "Fishing boats may anchor anywhere south of the old lighthouse after dusk.",
    "A vessel that stays longer than a week must pay the winter mooring fee.",
    "The ledger is copied every evening and the copy is kept in the customs house.",
]
OTHER = [
    "Bees collect nectar from clover and heather during the short northern summer.",
    "A strong colony can fill several frames of honey before the first frost.",
    "The keeper checks the hives each morning for signs of disease or robbing.",
]


UNREAD = [
    "Lanterns on the pier are lit by hand when the evening bell rings twice.",
    "Nobody may fish from the pier while the ferry is loading its passengers.",
]


def _docstring_module(sentences, extra=""):
    """A module whose docstring is the first sentence and whose function documents the rest."""
    body = "\n    ".join(sentences[1:])
    return f'"""{sentences[0]}"""\n\n\ndef f():\n    """{body}\n    """\n{extra}'


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    """A package "harbourpkg" on sys.path: modules with duplicates, tests, a skipped folder."""
    root = tmp_path / "site" / "harbourpkg"
    (root / "sub").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "api").mkdir()
    # Importing the package would fail: the readers must parse, never import.
    (root / "__init__.py").write_text('"""Harbour."""\nraise RuntimeError("imported")\n')
    (root / "a_ledger.py").write_text(_docstring_module(ORIGINAL))
    near = ORIGINAL[:]  # one word changed in each of two sentences: a near-duplicate document
    near[1] = near[1].replace("hour", "minute")
    near[4] = near[4].replace("week", "month")
    (root / "b_copy.py").write_text(_docstring_module(near))
    # Two sentences repeated from a_ledger and one new: exact duplicates are removed,
    # then one sentence is too few for a document.
    (root / "c_short.py").write_text(_docstring_module(
        [ORIGINAL[0], ORIGINAL[2], "Pilots board incoming ships beyond the sandbar."]))
    (root / "sub" / "d_bees.py").write_text(_docstring_module(
        OTHER + [ORIGINAL[3]], extra="if True:\n    class Hive:\n"
        '        """Hives are painted white so that they stay cool in the sun."""\n'))
    for path in ("tests/x.py", "sub/test_y.py", "sub/y_test.py", "api/e.py"):
        (root / path).write_text(_docstring_module(UNREAD))  # never read
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    yield embedded.PackageSource("harbourpkg", "harbourpkg-not-installed", skip=("api",))
    assert "harbourpkg" not in sys.modules


def test_docstring_sections_doctests_and_code_are_handled():
    text = textwrap.dedent("""\
        Pads the rows of a table with blank cells.

        Args:
          table: A list of rows. Rows shorter than the longest one get blank cells
            at their end.
          fill (str): The text of a blank cell, an empty string unless given.

        Returns:
          The padded table, a new list of new rows.

        Example:

            padded = pad([[1], [2, 3]])

        >>> pad([[1], [2, 3]])
        [[1, ''],
         [2, 3]]

        ```python
        print("Fenced code is never prose, even when it reads like it.")
        ```
        x : array_like
            Described on an indented line.
        The table itself is never changed by this call.
        """)
    assert embedded._document(text) == [
        "Pads the rows of a table with blank cells.",
        "A list of rows.",
        "Rows shorter than the longest one get blank cells at their end.",
        "The text of a blank cell, an empty string unless given.",
        "The padded table, a new list of new rows.",
        "The table itself is never changed by this call.",
    ]


def test_file_document_reads_every_docstring_without_importing(tmp_path):
    path = tmp_path / "mod.py"
    path.write_text(textwrap.dedent('''\
        """Module text comes first. It has two sentences."""
        import a_module_that_does_not_exist
        try:
            class Kept:
                """Classes inside try blocks are read. So are their methods."""
                def method(self):
                    """Methods come after their class. They are read depth first."""
        except ImportError:
            pass
        def later():
            """A function defined last is read last. Nothing else follows it."""
            x = "not a docstring. Never read as one."
        '''))
    assert embedded.file_document(str(path)) == [
        "Module text comes first.", "It has two sentences.",
        "Classes inside try blocks are read.", "So are their methods.",
        "Methods come after their class.", "They are read depth first.",
        "A function defined last is read last.", "Nothing else follows it."]
    (tmp_path / "broken.py").write_text('"""Unclosed.\n')
    assert embedded.file_document(str(tmp_path / "broken.py")) == []


def test_package_documents_are_named_skipped_and_deduplicated(fake_package):
    got = embedded.read_embedded_corpus([fake_package], python=False)
    names = [name for name, _ in got.documents]
    # b_copy: a near-duplicate of a_ledger; c_short: one sentence left after removing
    # exact duplicates; tests/, test_*.py and the skipped api/ are never read.
    assert names == ["package/harbourpkg/a_ledger.py", "package/harbourpkg/sub/d_bees.py"]
    docs = dict(got.documents)
    assert docs["package/harbourpkg/a_ledger.py"] == ORIGINAL
    assert docs["package/harbourpkg/sub/d_bees.py"] == OTHER + [
        "Hives are painted white so that they stay cool in the sun."]  # ORIGINAL[3] removed
    stats = got.summary["harbourpkg"]
    assert stats["version"] is None  # no such distribution
    assert (stats["documents_in"], stats["documents"]) == (4, 2)
    assert stats["near_duplicate_documents"] == 1 and stats["short_documents"] == 1
    kept = [s for _, doc in got.documents for s in doc]
    assert stats["sentences"] == len(kept) and stats["characters"] == sum(map(len, kept))
    assert stats["sentences_in"] == 6 + 6 + 3 + 5 and stats["documents_in"] == 4
    assert got.summary["total"]["documents"] == 2
    lines = embedded.summary_lines(got.summary)
    assert len(lines) == 3 and lines[1].startswith("harbourpkg") and lines[2].startswith("total")
    assert list(embedded.embedded_sources([fake_package], python=False)) == got.documents


def test_first_documents_are_read_lazily(fake_package, monkeypatch):
    read = []
    original = embedded.file_document
    monkeypatch.setattr(embedded, "file_document", lambda p: read.append(p) or original(p))
    first = list(embedded.embedded_documents(max_documents=100, packages=[fake_package]))
    assert len(first) == 100 and all(len(d) >= embedded.MIN_SENTENCES for d in first)
    assert read  # past the reference topics, into the standard library...
    assert not [p for p in read if "harbourpkg" in p]  # ...but not to the package after it


def test_missing_package_is_skipped():
    absent = embedded.PackageSource("no_such_package_anywhere", "no-such-package")
    assert absent.root() is None and absent.version() is None
    got = embedded.read_embedded_corpus([absent], python=False)
    assert got.documents == [] and "no_such_package_anywhere" not in got.summary


def test_default_packages_are_located_without_importing():
    before = set(sys.modules)
    for package in embedded.PACKAGES:
        root = package.root()
        if root is not None:
            assert os.path.isfile(os.path.join(root, "__init__.py")), package
            assert package.version(), package
    assert not {p.name for p in embedded.PACKAGES} & (set(sys.modules) - before)


def test_exact_duplicate_sentences_keep_the_first_occurrence():
    d = dedup.Deduplicator(min_sentences=2)
    assert d.add("x", ["One two three.", "Four five six.", "One two three."]) == [
        "One two three.", "Four five six."]
    assert d.add("y", ["Four five six.", "Seven eight nine.", "Ten eleven twelve."]) == [
        "Seven eight nine.", "Ten eleven twelve."]
    assert d.add("y", ["Seven eight nine.", "Thirteen fourteen."]) is None  # 1 left: too short
    # A dropped document's sentences are not "seen": the next occurrence is kept.
    assert d.add("y", ["Thirteen fourteen.", "Fifteen sixteen."]) == [
        "Thirteen fourteen.", "Fifteen sixteen."]
    assert d.stats["x"].to_dict() == {
        "documents_in": 1, "sentences_in": 3, "characters_in": 42, "documents": 1,
        "sentences": 2, "characters": 28, "near_duplicate_documents": 0, "short_documents": 0}
    assert d.stats["y"].short_documents == 1 and d.stats["y"].documents == 2


def _containment(a: list[str], b: list[str], n: int) -> float:
    """Share of b's word n-grams that occur in a (all n-grams, not a sample)."""
    import re

    def grams(doc):
        words = re.findall(r"[a-z0-9]+", " ".join(doc).lower())
        return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}
    return len(grams(a) & grams(b)) / len(grams(b))


def test_near_duplicate_documents_follow_shingle_containment():
    base = ORIGINAL + OTHER
    outcomes = []
    for changed in range(len(base) + 1):  # every 4th word changed in the first `changed` sentences
        doc = [" ".join(w + "s" if j % 4 == 2 else w for j, w in enumerate(s.split()))
               if i < changed else s for i, s in enumerate(base)]
        d = dedup.Deduplicator(min_sentences=2)
        assert d.add("a", base) is not None
        dropped = d.add("b", doc) is None
        assert dropped == (d.stats["b"].near_duplicate_documents == 1)
        outcomes.append((_containment(base, doc, dedup.SHINGLE_WORDS), dropped))
    # The sample estimates the exact containment: far from the threshold they agree.
    high = [dropped for exact, dropped in outcomes if exact >= dedup.NEAR_DUPLICATE_SHARE + 0.15]
    low = [dropped for exact, dropped in outcomes if exact <= dedup.NEAR_DUPLICATE_SHARE - 0.15]
    assert high and all(high), outcomes
    assert low and not any(low), outcomes
    d = dedup.Deduplicator(2)
    d.add("a", ORIGINAL)
    assert d.add("b", OTHER) == OTHER  # unrelated text is kept whole


def test_fingerprints_do_not_depend_on_the_hash_seed():
    text = ORIGINAL + OTHER
    here = sorted(dedup.shingle_sample(text))
    assert len(here) >= dedup.MIN_SAMPLED_SHINGLES
    script = ("import importlib.util, json, sys\n"
              f"spec = importlib.util.spec_from_file_location('d', {dedup.__file__!r})\n"
              "m = sys.modules['d'] = importlib.util.module_from_spec(spec)\n"
              "spec.loader.exec_module(m)\n"
              f"print(json.dumps(sorted(m.shingle_sample({text!r}))))\n")
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}, check=True)
        assert json.loads(out.stdout) == here
