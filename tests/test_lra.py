"""LRA loaders read fixture files in the release formats and reject malformed ones clearly."""
import pickle

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
    with pytest.raises(TaskError, match=r"new_aan_pairs\.train\.tsv.*" + str(tmp_path).replace("/", ".")):
        gen(LRARetrieval(data_dir=str(tmp_path)), "train")
    with pytest.raises(TaskError, match="cifar-10-batches-py/data_batch_1"):
        gen(LRAImage(data_dir=str(tmp_path)), "test")
    monkeypatch.setenv("BENCH_LRA_DIR", str(tmp_path))  # the environment fallback is used
    write_imdb(tmp_path, n=2)
    assert len(gen(LRAText(), "test")["label"]) == 4


def write_aan(root, rows):
    for name in ("train", "eval", "test"):
        (root / f"new_aan_pairs.{name}.tsv").write_text(
            "".join("\t".join(r) + "\n" for r in rows[name]), encoding="utf-8")


def test_retrieval_pairs_and_malformed_lines(tmp_path):
    rows = {s: [(str(float(i % 2)), f"id{i}a", f"id{i}b", f"{s} doc {i}", f"other {i}") for i in range(4)]
            for s in ("train", "eval", "test")}
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
    d.mkdir()
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
    r, g, b = (data[3].reshape(3, 1024).astype(np.float64) / 255)
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
        with pytest.raises(TaskError, match=r"^lra-text: " + train_folder + r"/\{pos,neg\}/\*\.txt holds 2 training "
                           r"examples; val_fraction=0\.1 holds out 0 for validation .* each needs at least one"):
            load_split(task, split)
    assert gen(LRAText(data_dir=str(tmp_path / "lra"), val_fraction=0.5), "val")["label"].tolist() in ([0], [1])
    code = main(["run", "--model", "lstm", "--task", "lra-text", "--preset", "smoke", "--out", str(tmp_path / "out"),
                 "--set", f"data.data_dir={tmp_path / 'lra'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and train_folder in err[0] and "val_fraction" in err[0], err
    assert not [p for p in cache.rglob("*") if p.is_dir() and p.parent != cache]  # no split folder
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").rglob("*.json"))
