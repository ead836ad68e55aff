"""``lra-retrieval``: AAN document matching, pairs of byte sequences read from the release's pair files."""

from __future__ import annotations

from pathlib import Path

from ..base import TaskError
from .files import BYTE_VOCAB, FileTask, encode_bytes
from .layouts import Layout


class LRARetrieval(FileTask):
    """AAN document matching: are two papers linked by citation? Pairs of byte sequences."""

    kind = "pair_classify"
    num_classes = 2
    name = "lra-retrieval"
    FILES = {"train": "new_aan_pairs.train.tsv", "val": "new_aan_pairs.eval.tsv", "test": "new_aan_pairs.test.tsv"}
    layouts = (
        Layout(
            "AAN pairs",
            {role: (name,) for role, name in FILES.items()},
            bases=("", "tsv_data", "aan"),
            shown="new_aan_pairs.{train,eval,test}.tsv in the folder, in tsv_data/ (the archive's) "
            "or in aan/ (where the scripts' dataset_setup.sh moves them)",
        ),
    )

    @property
    def vocab(self):
        return BYTE_VOCAB

    def _rows(self, path: Path, limit: int | None = None):
        """(label, text1, text2) per line of a pairs file; TaskError naming the line when malformed."""
        with open(path, "rb") as f:
            for n, line in enumerate(f, 1):
                if limit is not None and n > limit:
                    return
                cols = line.rstrip(b"\r\n").split(b"\t")
                if n == 1 and cols[0].strip().lower() == b"label":
                    continue  # tolerate a header line
                try:
                    if len(cols) == 3:
                        raise ValueError(
                            "3 tab-separated fields: this file holds ids only (label, id1, id2), as the "
                            "bucket's aan/*.only_ids.tsv; the texts are in lra_release/tsv_data/new_aan_pairs.*.tsv"
                        )
                    if len(cols) != 5:
                        raise ValueError(f"{len(cols)} tab-separated fields, expected 5")
                    label = int(float(cols[0]))
                    if label not in (0, 1):
                        raise ValueError(f"label {label} not in {{0, 1}}")
                except ValueError as e:
                    raise TaskError(
                        f"{self.name}: {path}:{n}: malformed line ({e}); format: label<TAB>id1<TAB>id2<TAB>text1<TAB>text2"
                    ) from None
                yield label, cols[3], cols[4]

    def generate(self, split, rng):
        path = self.found.files[split if split in self.FILES else "test"][0]
        out = {"tokens": [], "tokens2": [], "label": []}
        for label, a, b in self._rows(path):
            out["tokens"].append(encode_bytes(a, self.max_length, self.start_end))
            out["tokens2"].append(encode_bytes(b, self.max_length, self.start_end))
            out["label"].append(label)
        if not out["label"]:
            raise TaskError(f"{self.name}: {path} holds no examples")
        return out

    def check(self, found):
        for role in self.FILES:
            if not list(self._rows(found.files[role][0], limit=2)):
                raise TaskError(f"{self.name}: {found.files[role][0]} holds no examples")
        return "train, eval and test pair files"
