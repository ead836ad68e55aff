"""LRA loaders read fixture files in the release formats and reject malformed ones clearly."""

import io
import pickle
import struct

import numpy as np
import pytest

from bench.tasks.base import TaskError
from bench.tasks.listops import VOCAB as LISTOPS_VOCAB
from bench.tasks.listops import evaluate
from bench.tasks.lra import BYTE0, END, START, LRAImage, LRAListOps, LRARetrieval, LRAText


def gen(task, split):
    return task.generate(split, np.random.default_rng(task.split_seed(split)))


def write_imdb(root, n=10):
    texts = {}
    for part in ("train", "test"):
        for pol in ("pos", "neg"):
            d = root / "aclImdb" / part / pol
            d.mkdir(parents=True)
            for i in range(n):
                t = f"{part} {pol} review {i} " + "é!" * i
                (d / f"{i}_{7 if pol == 'pos' else 2}.txt").write_text(t, encoding="utf-8")
                texts[t.encode()] = int(pol == "pos")
    return texts


def test_text_reads_bytes_and_holds_out_validation(tmp_path):
    texts = write_imdb(tmp_path)
    task = LRAText(data_dir=str(tmp_path), max_length=40, val_fraction=0.25)
    tr, va, te = gen(task, "train"), gen(task, "val"), gen(task, "test")
    assert (len(tr["label"]), len(va["label"]), len(te["label"])) == (15, 5, 20)
    decode = lambda t: bytes((np.asarray(t[1:-1]) - BYTE0).astype(np.uint8).tolist())
    for d in (tr, va, te):
        for t, y in zip(d["tokens"], d["label"]):
            assert t[0] == START and t[-1] == END and len(t) <= 40
            full = next(k for k in texts if k.startswith(decode(t)))  # truncated to max_length
            assert texts[full] == y
    tr_set = {decode(t) for t in tr["tokens"]}
    assert not tr_set & {decode(t) for t in va["tokens"]}  # val held out of train
    assert all(decode(t).startswith(b"test") for t in te["tokens"])  # test never used as val
    assert all(decode(t).startswith(b"train") for t in va["tokens"])


def test_missing_files_name_what_is_expected(tmp_path, monkeypatch):
    monkeypatch.delenv("BENCH_LRA_DIR", raising=False)
    with pytest.raises(TaskError, match="BENCH_LRA_DIR"):
        gen(LRAText(), "train")
    where = str(tmp_path).replace("/", ".")
    with pytest.raises(TaskError, match=r"no files of it under " + where + r".*new_aan_pairs\.\{train,eval,test\}"):
        gen(LRARetrieval(data_dir=str(tmp_path)), "train")
    with pytest.raises(TaskError, match="cifar-10-batches-py/data_batch_1 .. data_batch_5, test_batch; or tfds cifar10"):
        gen(LRAImage(data_dir=str(tmp_path)), "test")
    monkeypatch.setenv("BENCH_LRA_DIR", str(tmp_path))  # the environment fallback is used
    write_imdb(tmp_path, n=2)
    assert len(gen(LRAText(), "test")["label"]) == 4


def write_aan(root, rows):
    for name in ("train", "eval", "test"):
        (root / f"new_aan_pairs.{name}.tsv").write_text("".join("\t".join(r) + "\n" for r in rows[name]), encoding="utf-8")


def test_retrieval_pairs_and_malformed_lines(tmp_path):
    rows = {
        s: [(str(float(i % 2)), f"id{i}a", f"id{i}b", f"{s} doc {i}", f"other {i}") for i in range(4)] for s in ("train", "eval", "test")
    }
    write_aan(tmp_path, rows)
    task = LRARetrieval(data_dir=str(tmp_path), max_length=64)
    val = gen(task, "val")
    assert list(val["label"]) == [0, 1, 0, 1]
    first = bytes((np.asarray(val["tokens"][0][1:-1]) - BYTE0).astype(np.uint8).tolist())
    second = bytes((np.asarray(val["tokens2"][0][1:-1]) - BYTE0).astype(np.uint8).tolist())
    assert (first, second) == (b"eval doc 0", b"other 0")
    rows["test"][2] = ("1", "x", "y", "only four fields")
    write_aan(tmp_path, rows)
    with pytest.raises(TaskError, match=r"new_aan_pairs\.test\.tsv:3: malformed.*4 tab-separated"):
        gen(task, "test")
    rows["test"][2] = ("yes", "x", "y", "a", "b")
    write_aan(tmp_path, rows)
    with pytest.raises(TaskError, match=r":3: malformed"):
        gen(task, "test")


def write_cifar(root, n=20):
    d = root / "cifar-10-batches-py"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    batches = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n).tolist()
        with open(d / name, "wb") as f:
            pickle.dump({b"data": data, b"labels": labels}, f)
        batches[name] = (data, labels)
    return batches


def test_image_grayscale_and_split(tmp_path):
    batches = write_cifar(tmp_path)
    task = LRAImage(data_dir=str(tmp_path), val_fraction=0.1)
    te, tr, va = gen(task, "test"), gen(task, "train"), gen(task, "val")
    assert te["tokens"].shape == (20, 1026) and (len(tr["label"]), len(va["label"])) == (90, 10)
    data, labels = batches["test_batch"]
    r, g, b = data[3].reshape(3, 1024).astype(np.float64) / 255
    expect = np.floor((0.2989 * r + 0.5870 * g + 0.1140 * b) * 255.5)
    assert np.abs(te["tokens"][3, 1:-1] - BYTE0 - expect).max() <= 1
    assert list(te["label"]) == labels
    (tmp_path / "cifar-10-batches-py" / "test_batch").write_bytes(pickle.dumps({b"data": np.zeros((2, 5))}))
    with pytest.raises(TaskError, match="not a CIFAR-10 python batch"):
        gen(task, "test")


class _Runs:  # a pickle that would call a function when loaded by pickle.load
    def __reduce__(self):
        return (print, ("unpickled",))


def test_a_cifar_batch_naming_code_is_refused_and_never_run(tmp_path, capsys):
    write_cifar(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "test_batch").write_bytes(pickle.dumps({b"data": _Runs(), b"labels": [0]}))
    with pytest.raises(TaskError, match="only numpy arrays and plain values are read"):
        gen(LRAImage(data_dir=str(tmp_path), val_fraction=0.1), "test")
    assert "unpickled" not in capsys.readouterr().out


def test_lra_listops_lengths_and_labels():
    task = LRAListOps(n_train=20, n_val=5, n_test=5)
    d = gen(task, "test")
    assert task.splits() == ["train", "val", "test"]
    for t, y, L in zip(d["tokens"], d["label"], d["length"]):
        assert 500 <= L <= 2000 and len(t) == L + 2
        assert evaluate([LISTOPS_VOCAB[i] for i in t]) == y


def test_the_tasks_keep_the_module_the_data_cache_and_the_registry_name():
    """bench/tasks/lra/ is a package of modules, and each task class still says bench.tasks.lra, the
    module its registry target names and its cached splits' fingerprints were made with."""
    from bench.data import fingerprint

    assert {cls.__module__ for cls in (LRAListOps, LRAText, LRARetrieval, LRAImage)} == {"bench.tasks.lra"}
    assert fingerprint(LRAListOps(), "test") == "fd2b7cbb01f1dce6"  # as when the tasks were one file


def test_text_with_too_few_reviews_to_hold_out_validation(tmp_path, monkeypatch, capsys):
    """One review per class: 10% of 2 files is 0, so validation would be empty. One line naming
    the folder and what is needed, for the task and for `bench run`; nothing cached or written."""
    from bench.cli import main
    from bench.data import load_split

    write_imdb(tmp_path / "lra", n=1)
    cache = tmp_path / "cache"
    monkeypatch.setenv("BENCH_DATA_DIR", str(cache))
    task = LRAText(data_dir=str(tmp_path / "lra"))
    train_folder = str(tmp_path / "lra" / "aclImdb" / "train")
    for split in ("train", "val"):
        with pytest.raises(
            TaskError,
            match=r"^lra-text: " + train_folder + r"/\{pos,neg\}/\*\.txt holds 2 training "
            r"examples; val_fraction=0\.1 holds out 0 for validation .* each needs at least one",
        ):
            load_split(task, split)
    assert gen(LRAText(data_dir=str(tmp_path / "lra"), val_fraction=0.5), "val")["label"].tolist() in ([0], [1])
    code = main(
        [
            "run",
            "--model",
            "lstm",
            "--task",
            "lra-text",
            "--preset",
            "smoke",
            "--out",
            str(tmp_path / "out"),
            "--set",
            f"data.data_dir={tmp_path / 'lra'}",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and train_folder in err[0] and "val_fraction" in err[0], err
    assert not [p for p in cache.rglob("*") if p.is_dir() and p.parent != cache]  # no split folder
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").rglob("*.json"))


# ---- the release's layouts: the archive's, the scripts' (tfds), and `bench data check` ----------


def _varint(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def _ld(field, payload):  # a length-delimited protobuf field
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def encode_example(features):
    """A tf.train.Example from {name: bytes | int} (written here as protobuf's wire format defines it)."""
    entries = b""
    for name, v in features.items():
        feat = _ld(1, _ld(1, v)) if isinstance(v, bytes) else _ld(3, _ld(1, _varint(v)))  # BytesList | packed Int64List
        entries += _ld(1, _ld(1, name.encode()) + _ld(2, feat))
    return _ld(1, entries)


def write_tfrecord(path, examples):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for ex in examples:
            data = encode_example(ex)
            f.write(struct.pack("<Q", len(data)) + b"\0" * 4 + data + b"\0" * 4)  # CRCs are not checked


def test_example_parser_on_hand_assembled_bytes():
    from bench.tasks.lra import parse_example

    # Example{features{feature{key "label" value{int64_list{value: [1]}}} feature{key "text" value{bytes_list{"hi"}}}}},
    # byte by byte: 0x0a = field 1 length-delimited, 0x12 = field 2, 0x1a = field 3 (int64_list)
    label = b"\x0a\x0e" + b"\x0a\x05label" + b"\x12\x05" + b"\x1a\x03\x0a\x01\x01"
    text = b"\x0a\x0e" + b"\x0a\x04text" + b"\x12\x06" + b"\x0a\x04\x0a\x02hi"
    ex = b"\x0a\x20" + label + text
    assert parse_example(ex) == {"label": [1], "text": [b"hi"]}
    assert encode_example({"label": 1, "text": b"hi"}) == ex  # the fixtures' writer agrees with the hand bytes
    # an unpacked int64 (wire type 0) and a negative one (two's complement over 64 bits)
    assert parse_example(_ld(1, _ld(1, _ld(1, b"y") + _ld(2, _ld(3, b"\x08\x07\x08" + _varint((1 << 64) - 3))))))["y"] == [7, -3]


def test_text_from_tfds_shards_as_the_scripts_load_it(tmp_path):
    """tfds' imdb_reviews (LRA's scripts: tfds.load('imdb_reviews')): shards read in order, the newest version."""
    base = tmp_path / "tensorflow_datasets" / "imdb_reviews" / "plain_text"
    train = [{"text": f"train review {i}".encode(), "label": i % 2} for i in range(12)]
    write_tfrecord(base / "1.0.0" / "imdb_reviews-train.tfrecord-00000-of-00002", train[:7])
    write_tfrecord(base / "1.0.0" / "imdb_reviews-train.tfrecord-00001-of-00002", train[7:])
    write_tfrecord(base / "1.0.0" / "imdb_reviews-test.tfrecord-00000-of-00001", [{"text": b"a test", "label": 1}])
    write_tfrecord(base / "0.1.0" / "imdb_reviews-train.tfrecord-00000-of-00001", [{"text": b"old", "label": 0}])
    write_tfrecord(base / "0.1.0" / "imdb_reviews-test.tfrecord-00000-of-00001", [{"text": b"old", "label": 0}])
    task = LRAText(data_dir=str(tmp_path), max_length=64, val_fraction=0.25)
    decode = lambda t: bytes((np.asarray(t[1:-1]) - BYTE0).astype(np.uint8).tolist())
    te, tr, va = gen(task, "test"), gen(task, "train"), gen(task, "val")
    assert [decode(t) for t in te["tokens"]] == [b"a test"] and list(te["label"]) == [1]
    got = {decode(t): int(y) for d in (tr, va) for t, y in zip(d["tokens"], d["label"])}
    assert got == {e["text"]: e["label"] for e in train} and (len(tr["label"]), len(va["label"])) == (9, 3)


def test_retrieval_in_the_archives_and_the_scripts_layouts(tmp_path):
    rows = {s: [(str(i % 2), f"id{i}", f"id{i}b", f"{s} doc {i}", f"other {i}") for i in range(3)] for s in ("train", "eval", "test")}
    archive = tmp_path / "a" / "lra_release" / "lra_release" / "tsv_data"  # lra_release.gz unpacked
    scripts = tmp_path / "s" / "aan"  # dataset_setup.sh: mv lra_release/lra_release/tsv_data aan
    for d in (archive, scripts):
        d.mkdir(parents=True)
        write_aan(d, rows)
    for root in (tmp_path / "a", tmp_path / "s", scripts):
        assert list(gen(LRARetrieval(data_dir=str(root)), "val")["label"]) == [0, 1, 0]
    (scripts / "new_aan_pairs.test.tsv").write_text("1\tid1\tid2\n")  # the bucket's ids-only files
    with pytest.raises(TaskError, match=r"new_aan_pairs\.test\.tsv:1: malformed line \(3 tab-separated fields: this file holds ids only"):
        gen(LRARetrieval(data_dir=str(scripts)), "test")


def test_image_from_tfds_pngs_equals_the_python_release(tmp_path):
    """The same pixels written as the python release and as tfds' PNG shards give the same tokens."""
    from PIL import Image

    batches = write_cifar(tmp_path / "py", n=4)
    shards = tmp_path / "tf" / "cifar10" / "3.0.2"
    for split, names in (("train", [f"data_batch_{i}" for i in range(1, 6)]), ("test", ["test_batch"])):
        examples = []
        for name in names:
            data, labels = batches[name]
            for row, y in zip(data, labels):
                buf = io.BytesIO()
                Image.fromarray(row.reshape(3, 32, 32).transpose(1, 2, 0)).save(buf, format="PNG")
                examples.append({"id": b"x", "image": buf.getvalue(), "label": int(y)})
        write_tfrecord(shards / f"cifar10-{split}.tfrecord-00000-of-00001", examples)
    py, tf = LRAImage(data_dir=str(tmp_path / "py")), LRAImage(data_dir=str(tmp_path / "tf"))
    for split in ("train", "val", "test"):
        a, b = gen(py, split), gen(tf, split)
        assert np.array_equal(a["tokens"], b["tokens"]) and np.array_equal(a["label"], b["label"])


def test_data_check_names_the_layout_or_what_is_missing(tmp_path, capsys):
    from bench.cli import main

    write_imdb(tmp_path / "lra_release", n=2)  # the aclImdb release put beside the archive's folders
    tsv = tmp_path / "lra_release" / "lra_release" / "tsv_data"
    tsv.mkdir(parents=True)
    write_aan(tsv, {s: [("1", "a", "b", "x", "y")] for s in ("train", "eval", "test")})
    write_cifar(tmp_path, n=2)
    assert main(["data", "check", "--task", "lra", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"lra-text: ok: aclImdb release in {tmp_path / 'lra_release'} (train 4 reviews, test 4)",
        f"lra-retrieval: ok: AAN pairs in {tsv} (train, eval and test pair files)",
        f"lra-image: ok: CIFAR-10 python release in {tmp_path} (5 training batches, test_batch of 2 images)",
    ]
    (tsv / "new_aan_pairs.eval.tsv").unlink()
    for neg in (tmp_path / "lra_release" / "aclImdb" / "test" / "neg").glob("*.txt"):
        neg.unlink()
    assert main(["data", "check", "--task", "lra-retrieval", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"bench: error: lra-retrieval: missing new_aan_pairs.eval.tsv in {tsv} "), err
    assert main(["data", "check", "--task", "lra", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()  # one line per task with a problem
    assert [e.split(":")[2].strip() for e in err] == ["lra-text", "lra-retrieval"]
    assert "missing aclImdb/test/neg/*.txt in " + str(tmp_path / "lra_release") in err[0]
    assert main(["data", "check", "--task", "lra-image", "--root", str(tmp_path / "nowhere")]) == 2
    assert "is not there; give the folder you downloaded the files to" in capsys.readouterr().err
    assert main(["data", "check", "--task", "listops", "--root", str(tmp_path)]) == 2
    assert "reads no files of yours" in capsys.readouterr().err


def test_table4_cpu_prints_file_columns_as_needing_data_and_skips_them_until_found(tmp_path, monkeypatch, capsys):
    """halt-table4-cpu without records: generated columns "—", file columns "needs data" with the
    command in the note; --run's plan skips a file column (one line why) until its files are found."""
    from bench.cli import main
    from bench.records import base_record, record_path, write_json_atomic
    from bench.registry import Registry
    from bench.report.reproduce import absent_data, build, load_table

    monkeypatch.delenv("BENCH_LRA_DIR", raising=False)
    registry, table = Registry(), load_table("halt-table4-cpu")
    assert [c.label for c in table.columns] == ["ListOps", "Text", "Retrieval", "Image", "Pathfinder"]
    assert [r.model for r in table.rows] == ["transformer", "ut", "gut", "tlb", "gutlb"] and len(table.seeds) == 5
    built = build(table, tmp_path, "small")
    line = next(r for r in built["rows"] if r[0] == "gut")
    at = {h: i for i, h in enumerate(built["headers"])}
    assert [line[at[f"{c} ours"]] for c in ("ListOps", "Text", "Retrieval", "Image", "Pathfinder")] == [
        "—",
        "needs data",
        "needs data",
        "needs data",
        "—",
    ]
    absent = absent_data(table, registry, "small")
    assert sorted(absent) == ["lra-image", "lra-retrieval", "lra-text"]
    assert absent["lra-retrieval"].startswith("lra-retrieval: no data directory") and "bench data check" in absent["lra-retrieval"]
    # once the files are there (here: Retrieval's), that column is planned and a record fills its cell
    write_aan(tmp_path, {s: [("1", "a", "b", "x", "y")] for s in ("train", "eval", "test")})
    monkeypatch.setenv("BENCH_LRA_DIR", str(tmp_path))
    assert sorted(absent_data(table, registry, "small")) == ["lra-image", "lra-text"]
    col = next(c for c in table.columns if c.label == "Retrieval")
    for seed in (0, 1):
        rec = base_record("gut", "lra-retrieval", "small", seed, table.cell_set(table.rows[2], col))
        rec.update(status="ok", metrics={"test": {"n": 1000, "acc": 0.6 + seed / 100}})
        write_json_atomic(record_path(tmp_path, "gut", "lra-retrieval", "small", seed, table.cell_set(table.rows[2], col)), rec)
    line = next(r for r in build(table, tmp_path, "small")["rows"] if r[0] == "gut")
    assert line[at["Retrieval ours"]].startswith("60.5 ± ") and line[at["Text ours"]] == "needs data"
    # the command prints it, the note says what "needs data" means and how to fill it
    monkeypatch.delenv("BENCH_LRA_DIR")
    assert main(["reproduce", "halt-table4-cpu", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "needs data = no record, and the task reads files you supply: Text: bench data check --task lra-text --root PATH" in out


def test_lra_listops_reads_the_release_files_only_when_given_a_folder(tmp_path, monkeypatch):
    """The archive's listops-1000/basic_*.tsv (the scripts' listops/): LRA's bracketed trees, header
    Source<TAB>Target; brackets dropped as LRA's pipeline drops them; values checked by evaluate()."""
    folder = tmp_path / "lra_release" / "lra_release" / "listops-1000"
    folder.mkdir(parents=True)
    trees = {
        "train": ["( ( [MAX 2 9 ) ( [MIN 4 7 ] ) 0 ] )", "( [SM 3 4 ] )"],
        "val": ["( [MED 1 5 8 ] )"],
        "test": ["( ( [MIN 3 ( [SM 9 9 ] ) ] ) )"],
    }
    for split, rows in trees.items():
        (folder / f"basic_{split}.tsv").write_text("Source\tTarget\n" + "".join(f"{t}\t{evaluate_text(t)}\n" for t in rows))
    monkeypatch.setenv("BENCH_LRA_DIR", str(tmp_path))  # the generated task ignores it
    assert len(gen(LRAListOps(n_train=3, n_val=2, n_test=2), "test")["label"]) == 2
    task = LRAListOps(data_dir=str(tmp_path))
    d = gen(task, "train")
    assert [[LISTOPS_VOCAB[i] for i in t] for t in d["tokens"]][1] == ["<start>", "[SM", "3", "4", "]", "<end>"]
    assert list(d["label"]) == [9, 7] and list(d["length"]) == [9, 4]
    for split in ("val", "test"):
        got = gen(task, split)
        assert all(evaluate([LISTOPS_VOCAB[i] for i in t]) == y for t, y in zip(got["tokens"], got["label"]))
    from bench.tasks.lra import check_data

    assert check_data("lra-listops", str(tmp_path)) == f"lra-listops: ok: LRA ListOps files in {folder} (train, val and test files)"
    (folder / "basic_test.tsv").write_text("Source\tTarget\n( [MAX 2 x ] )\t2\n")
    with pytest.raises(TaskError, match=r"basic_test\.tsv:2: unknown token 'x'"):
        gen(task, "test")


def evaluate_text(tree: str) -> int:
    """The value of a tree written as LRA writes it (brackets ignored)."""
    return evaluate(["<start>", *(t for t in tree.split() if t not in ("(", ")")), "<end>"])
