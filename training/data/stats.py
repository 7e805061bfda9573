"""Statistics of generated pretraining data, and the JSON summary written next to the shards."""

from __future__ import annotations

import collections
import dataclasses
import logging

import numpy as np

from . import pairs
from .corpus import CorpusReport


class DataStats:
    """Statistics of generated instances, mergeable across shards and processes."""

    def __init__(self):
        self.documents = 0
        self.instances = 0
        self.tokens = 0  # real tokens, [CLS]/[SEP] included
        self.masked = 0
        self.budget = 0  # sum of num_to_predict
        self.ngrams: collections.Counter = collections.Counter()
        self.kinds = np.zeros(3, np.int64)  # [MASK], random, kept
        self.sop = np.zeros(2, np.int64)  # sentence-pair labels 0, 1 (SOP: in order, swapped)
        self.skipped = CorpusReport()
        self.short = CorpusReport()  # used, but shorter than one sequence

    def add(self, instance: pairs.Instance) -> None:
        self.instances += 1
        self.tokens += len(instance.input_ids)
        self.masked += len(instance.masked.positions)
        self.budget += instance.masked.budget
        self.ngrams.update(instance.masked.ngrams)
        self.kinds += instance.masked.kind_counts
        self.sop[instance.sentence_order_label] += 1

    def merge(self, other: dict) -> None:
        """Adds statistics given as `to_dict()` output."""
        self.documents += other["documents"]
        self.instances += other["instances"]
        self.tokens += other["tokens"]
        self.masked += other["masked"]
        self.budget += other["budget"]
        self.ngrams.update({int(n): c for n, c in other["ngrams"].items()})
        self.kinds += np.array(other["kinds"])
        self.sop += np.array(other["sop"])
        self.skipped.merge(other["skipped"])
        self.short.merge(other["short"])

    def to_dict(self) -> dict:
        return {"documents": self.documents, "instances": self.instances, "tokens": self.tokens,
                "masked": self.masked, "budget": self.budget,
                "ngrams": {str(n): c for n, c in sorted(self.ngrams.items())},
                "kinds": self.kinds.tolist(), "sop": self.sop.tolist(),
                "skipped": self.skipped.to_dict(), "short": self.short.to_dict()}


def summarize(name: str, shard_stats: dict, report: CorpusReport, options: pairs.GenerationOptions,
              wall_time: float) -> dict:
    """The JSON summary of a run from per-shard statistics and the reader's report."""
    total = DataStats()
    for shard in sorted(shard_stats):
        total.merge(shard_stats[shard])
    total.skipped.merge(report.to_dict())
    kinds = total.kinds / max(total.kinds.sum(), 1)
    ngrams = sum(total.ngrams.values())
    return {
        "corpus": name,
        "options": dataclasses.asdict(options),
        "shards": len(shard_stats),
        "documents": total.documents,
        "instances": total.instances,
        "tokens": total.tokens,
        "masked_tokens": total.masked,
        "masked_fraction": round(total.masked / max(total.tokens, 1), 5),
        # masked / sum of min(max_predictions_per_seq, round(masked_lm_prob * length))
        "masked_of_budget": round(total.masked / max(total.budget, 1), 5),
        "masked_per_instance": round(total.masked / max(total.instances, 1), 2),
        "ngram_histogram": {str(n): total.ngrams[n] for n in range(1, options.max_ngram + 1)},
        "ngram_fractions": {str(n): round(total.ngrams[n] / max(ngrams, 1), 4)
                            for n in range(1, options.max_ngram + 1)},
        "replacement_fractions": {"mask": round(kinds[0], 4), "random": round(kinds[1], 4),
                                  "kept": round(kinds[2], 4)},
        "sop": {"in_order": int(total.sop[0]), "swapped": int(total.sop[1]),
                "swapped_fraction": round(total.sop[1] / max(total.sop.sum(), 1), 4)},
        # label 1 is the negative: swapped (sop), from another document (nsp), never (none)
        "objective": options.objective,
        "negative_fraction": round(total.sop[1] / max(total.sop.sum(), 1), 4),
        "shorter_than_sequence": total.short.to_dict().get("shorter_than_sequence", {"count": 0}),
        "skipped": total.skipped.to_dict(),
        "wall_time_s": round(wall_time, 2),
    }


_NAMED_ON_STDERR = {"binary_file": "file", "unreadable_file": "file",
                    "overlong_line": "documents", "invalid_utf8": "documents"}


def warn_skipped(summary: dict, logger: logging.Logger) -> None:
    """One warning per file and reason for what was left out of it: a whole file (binary,
    unreadable) or its documents holding an overlong or non-UTF-8 line, with the first place."""
    for reason, entry in summary.get("skipped", {}).items():
        if reason not in _NAMED_ON_STDERR:
            continue
        for file, count in entry["files"].items():
            first = next((e[len(file) + 2:] for e in entry["examples"]
                          if e.startswith(file + ": ")), "")
            logger.warning("skipped %s: %s (%d %s%s)", reason.replace("_", " "), file, count,
                           _NAMED_ON_STDERR[reason], f"; first: {first}" if first else "")
