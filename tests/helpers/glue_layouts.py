"""A miniature glue_data/ laid out byte for byte as GLUE's download_glue_data.py writes it.

Each task gets train / dev / test files with the distributed headers (or none,
for CoLA's train and dev), cell counts, byte-order mark (MRPC's train and dev
header, copied from msr_paraphrase_train.txt), label spellings, float scores
(STS-B), parse-tree columns (MNLI), rows with missing fields (QQP: a question
holding a newline splits its row in two) and texts with unbalanced quotes, as
the real files have. `write_glue_data(root)` returns what it wrote, so tests
compare what is read with what is on disk.
"""

from __future__ import annotations

import os

# Texts in the style of the GLUE sets: tokenised punctuation, unbalanced and
# paired double quotes, apostrophes, a trailing space (SST-2), non-ASCII.
TEXTS = [
    'Amrozi accused his brother , whom he called " the witness " , of deliberately distorting his evidence .',
    "it 's a charming and often affecting journey . ",
    'He said " it will rain tomorrow and left .',
    "The café's owner didn't know 12\" pizzas cost more .",
    "Our friends won't buy this analysis, let alone the next one we propose.",
    'Yucaipa owned Dominick \'s before selling the chain to Safeway in 1998 for $ 2.5 billion .',
    "What is the step by step guide to invest in share market in india?",
    "A plane is taking off .",
    "An air plane is taking off .",
    "The sailors rode the breeze clear of the rocks.",
    "The weights were all ( a bit ) heavy \" .",
    "How can I be a good geologist?",
]

N_TRAIN, N_DEV, N_TEST = 8, 6, 5


def _text(i: int) -> str:
    return TEXTS[i % len(TEXTS)]


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def _binary(i: int) -> str:
    return str((i * 7 + 3) % 5 % 2)


def _nli(i: int, three: bool) -> str:
    names = ("entailment", "neutral", "contradiction") if three else ("entailment", "not_entailment")
    return names[(i * 5 + 1) % len(names)]


def _lines(rows) -> str:
    return "".join("\t".join(row) + "\n" for row in rows)


def cola(root):
    out = {}
    for split, n in (("train", N_TRAIN), ("dev", N_DEV)):
        labels = [_binary(i) for i in range(n)]
        rows = [("gj04", label, "" if label == "1" else "*", _text(i)) for i, label in enumerate(labels)]
        _write(f"{root}/CoLA/{split}.tsv", _lines(rows))
        out[split] = ([r[3] for r in rows], None, labels, [str(i) for i in range(len(rows))])
    rows = [(str(i), _text(i + 3)) for i in range(N_TEST)]
    _write(f"{root}/CoLA/test.tsv", _lines([("index", "sentence"), *rows]))
    out["test"] = ([r[1] for r in rows], None, [r[0] for r in rows])
    return out


def sst2(root):
    out = {}
    for split, n in (("train", N_TRAIN), ("dev", N_DEV)):
        rows = [(_text(i), _binary(i)) for i in range(n)]
        _write(f"{root}/SST-2/{split}.tsv", _lines([("sentence", "label"), *rows]))
        out[split] = ([r[0] for r in rows], None, [r[1] for r in rows], [str(i) for i in range(len(rows))])
    rows = [(str(i), _text(i + 5)) for i in range(N_TEST)]
    _write(f"{root}/SST-2/test.tsv", _lines([("index", "sentence"), *rows]))
    out["test"] = ([r[1] for r in rows], None, [r[0] for r in rows])
    return out


MRPC_HEADER = ("\ufeffQuality", "#1 ID", "#2 ID", "#1 String", "#2 String")


def mrpc_rows(n: int, start: int):
    return [(_binary(i), str(702876 + 11 * i), str(702977 + 13 * i), _text(i), _text(i + 1))
            for i in range(start, start + n)]


def mrpc(root):
    out = {}
    for split, n, start in (("train", N_TRAIN, 0), ("dev", N_DEV, 100)):
        rows = mrpc_rows(n, start)
        _write(f"{root}/MRPC/{split}.tsv", _lines([MRPC_HEADER, *rows]))
        out[split] = ([r[3] for r in rows], [r[4] for r in rows], [r[0] for r in rows],
                      [str(i) for i in range(len(rows))])
    rows = [(str(i), *r[1:]) for i, r in enumerate(mrpc_rows(N_TEST, 200))]
    _write(f"{root}/MRPC/test.tsv", _lines([("index", "#1 ID", "#2 ID", "#1 String", "#2 String"), *rows]))
    out["test"] = ([r[3] for r in rows], [r[4] for r in rows], [r[0] for r in rows])
    return out


QQP_SHORT_ROWS = 2  # per labelled file


def qqp(root):
    out = {}
    header = ("id", "qid1", "qid2", "question1", "question2", "is_duplicate")
    for split, n in (("train", N_TRAIN), ("dev", N_DEV)):
        rows = [(str(133273 + i), str(213221 + 2 * i), str(213222 + 2 * i), _text(i), _text(i + 6),
                 _binary(i)) for i in range(n)]
        # A question holding a newline: its row is cut into a 4-cell and a 3-cell line.
        broken = "201359\t303345\t303346\tWhy are African-Americans so beautiful?\n" \
                 "\tWhy are hispanics so beautiful?\t0\n"
        text = _lines([header, *rows[:3]]) + broken + _lines(rows[3:])
        _write(f"{root}/QQP/{split}.tsv", text)
        out[split] = ([r[3] for r in rows], [r[4] for r in rows], [r[5] for r in rows], [r[0] for r in rows])
    rows = [(str(i), _text(i + 2), _text(i + 4)) for i in range(N_TEST)]
    _write(f"{root}/QQP/test.tsv", _lines([("id", "question1", "question2"), *rows]))
    out["test"] = ([r[1] for r in rows], [r[2] for r in rows], [r[0] for r in rows])
    return out


STSB_HEADER = ("index", "genre", "filename", "year", "old_index", "source1", "source2",
               "sentence1", "sentence2")


def stsb(root):
    out = {}
    for split, n in (("train", N_TRAIN), ("dev", N_DEV)):
        rows = [(str(i), "main-captions", "MSRvid", "2012test", f"{i + 1:04d}", "none", "none",
                 _text(i + 7), _text(i + 8), f"{(i * 1.37) % 5:.3f}") for i in range(n)]
        _write(f"{root}/STS-B/{split}.tsv", _lines([(*STSB_HEADER, "score"), *rows]))
        out[split] = ([r[7] for r in rows], [r[8] for r in rows], [r[9] for r in rows], [r[0] for r in rows])
    rows = [(str(i), "main-news", "headlines", "2016", f"{i:04d}", "none", "none", _text(i), _text(i + 2))
            for i in range(N_TEST)]
    _write(f"{root}/STS-B/test.tsv", _lines([STSB_HEADER, *rows]))
    out["test"] = ([r[7] for r in rows], [r[8] for r in rows], [r[0] for r in rows])
    return out


MNLI_HEADER = ("index", "promptID", "pairID", "genre", "sentence1_binary_parse",
               "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1", "sentence2")


def _mnli_row(i, s1, s2):
    binary = "( ( " + " ) ( ".join(s1.split()[:3]) + " ) )"
    return (str(i), str(31193 + i), f"{31193 + i}n", "government", binary, binary,
            f"(ROOT (S (NP (NN {s1.split()[0]}))))", f"(ROOT (S (NP (NN {s2.split()[0]}))))", s1, s2)


def mnli(root):
    out = {}
    rows = [(*_mnli_row(i, _text(i), _text(i + 1)), _nli(i, True), _nli(i, True)) for i in range(N_TRAIN)]
    _write(f"{root}/MNLI/train.tsv", _lines([(*MNLI_HEADER, "label1", "gold_label"), *rows]))
    out["train"] = ([r[8] for r in rows], [r[9] for r in rows], [r[-1] for r in rows], [r[0] for r in rows])
    dev_header = (*MNLI_HEADER, "label1", "label2", "label3", "label4", "label5", "gold_label")
    for split, shift in (("dev_matched", 1), ("dev_mismatched", 2)):
        rows = [(*_mnli_row(i, _text(i + shift), _text(i + 3)), *[_nli(i + k, True) for k in range(5)],
                 _nli(i + shift, True)) for i in range(N_DEV)]
        _write(f"{root}/MNLI/{split}.tsv", _lines([dev_header, *rows]))
        out[split] = ([r[8] for r in rows], [r[9] for r in rows], [r[-1] for r in rows], [r[0] for r in rows])
    for split, shift in (("test_matched", 0), ("test_mismatched", 4)):
        rows = [_mnli_row(i, _text(i + shift), _text(i + 5)) for i in range(N_TEST + shift // 4)]
        _write(f"{root}/MNLI/{split}.tsv", _lines([MNLI_HEADER, *rows]))
        out[split] = ([r[8] for r in rows], [r[9] for r in rows], [r[0] for r in rows])
    rows = [(str(i), _text(i + 9), _text(i + 10)) for i in range(N_TEST + 2)]
    _write(f"{root}/diagnostic/diagnostic.tsv", _lines([("index", "sentence1", "sentence2"), *rows]))
    out["diagnostic"] = ([r[1] for r in rows], [r[2] for r in rows], [r[0] for r in rows])
    return out


def _indexed_pairs(root, directory, header, label):
    out = {}
    for split, n in (("train", N_TRAIN), ("dev", N_DEV)):
        rows = [(str(i), _text(i + 2), _text(i + 3), label(i)) for i in range(n)]
        _write(f"{root}/{directory}/{split}.tsv", _lines([(*header, "label"), *rows]))
        out[split] = ([r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows], [r[0] for r in rows])
    rows = [(str(i), _text(i), _text(i + 1)) for i in range(N_TEST)]
    _write(f"{root}/{directory}/test.tsv", _lines([header, *rows]))
    out["test"] = ([r[1] for r in rows], [r[2] for r in rows], [r[0] for r in rows])
    return out


def qnli(root):
    return _indexed_pairs(root, "QNLI", ("index", "question", "sentence"), lambda i: _nli(i, False))


def rte(root):
    return _indexed_pairs(root, "RTE", ("index", "sentence1", "sentence2"), lambda i: _nli(i, False))


def wnli(root):
    return _indexed_pairs(root, "WNLI", ("index", "sentence1", "sentence2"), _binary)


WRITERS = {"cola": cola, "sst2": sst2, "mrpc": mrpc, "qqp": qqp, "stsb": stsb, "mnli": mnli,
           "qnli": qnli, "rte": rte, "wnli": wnli}
# The files each task's read splits come from: (split key in the writer's result).
EVAL_SPLITS = {"mnli": {"matched": "dev_matched", "mismatched": "dev_mismatched"}}
TEST_SPLITS = {"mnli": {"MNLI-m": "test_matched", "MNLI-mm": "test_mismatched", "AX": "diagnostic"}}
SUBMISSION_STEMS = {"cola": "CoLA", "sst2": "SST-2", "mrpc": "MRPC", "qqp": "QQP", "stsb": "STS-B",
                    "qnli": "QNLI", "rte": "RTE", "wnli": "WNLI"}


def write_glue_data(root: str) -> dict[str, dict]:
    """Writes every task under `root` (= glue_data/); returns task -> split -> (texts_a,
    texts_b or None, labels as written, ids) for train and dev files (ids: the file's index
    cell, else the row number from 0), and (texts_a, texts_b or None, indices) for tests."""
    return {name: writer(str(root)) for name, writer in WRITERS.items()}


def write_msr_sources(directory: str) -> tuple[list, list, set]:
    """MRPC as distributed before download_glue_data.py splits it: msr_paraphrase_train.txt
    and msr_paraphrase_test.txt (both with a byte-order mark and a label column) and
    dev_ids.tsv. Returns (train rows, test rows, dev id pairs)."""
    train = mrpc_rows(N_TRAIN + N_DEV, 0)
    test = mrpc_rows(N_TEST, 300)
    _write(f"{directory}/msr_paraphrase_train.txt", _lines([MRPC_HEADER, *train]))
    _write(f"{directory}/msr_paraphrase_test.txt", _lines([MRPC_HEADER, *test]))
    dev = {(r[1], r[2]) for r in train[1::3]}
    _write(f"{directory}/dev_ids.tsv", _lines(sorted(dev)))
    return train, test, dev
