"""The paper presets and generated data say what the papers say.

Every value asserted here is read off a paper (section cited) or computed by hand from the
source generator's definition, not from our code: a preset or generator that drifts from
the papers fails here.
"""

import re

import numpy as np
import pytest
import torch
from conformance import MODELS, TASKS, model_class, task_class

import bench
from bench.config import TRAIN_DEFAULTS, resolve_run
from bench.models.chunked import ChunkRecurrent
from bench.models.transformer import NoPE, Transformer
from bench.models.universal import GUT, UT
from bench.registry import Registry
from bench.tasks.flipflop import FlipFlop
from bench.tasks.formal_languages import FormalLanguage

REG = Registry()
# the cases, from the registry's classes (tests/conformance.py), never a list of names
LANGUAGES = [t for t in TASKS if issubclass(task_class(t), FormalLanguage)]  # [RSA Table 2]'s formal languages
LRA = [t for t in TASKS if t.startswith("lra-")]  # the Long Range Arena tasks
TRANSFORMERS = [m for m in MODELS if model_class(m) is Transformer]  # the vanilla Transformer and its RSA hosts
UTS = [m for m in MODELS if issubclass(model_class(m), UT)]  # UT, GUT and GUT's ablations
GUTS = [m for m in MODELS if issubclass(model_class(m), GUT)]  # GUT and its ablations
CHUNKED = [m for m in MODELS if issubclass(model_class(m), ChunkRecurrent)]  # TLB (TLB-FR, its RSA host) and GUTLB


def resolve(model: str, task: str, preset: str = "paper") -> dict:
    """The resolved config as a run's record holds it."""
    return resolve_run(REG, model, task, preset).public()


# ---- [RSA §4.2, App. E.2, Table 2]: formal languages ------------------------------------------


@pytest.mark.conformance(family="model", task="task")
@pytest.mark.parametrize("task", LANGUAGES)
@pytest.mark.parametrize("model", TRANSFORMERS)
def test_rsa_table2_hosts_use_absolute_sinusoidal_positions(model, task):
    """[RSA §4.2]: the baseline is the vanilla Transformer with absolute sinusoidal PE, and the
    RSA-Transformer only modifies its self-attention layers: every entry of the Transformer class."""
    cfg = resolve(model, task)
    assert cfg["model"]["target"] == "bench.models.transformer:Transformer"
    assert cfg["model"]["params"]["pos_encoding"] == "sinusoidal"


@pytest.mark.conformance(task="task")
@pytest.mark.parametrize("task", LANGUAGES)
def test_rsa_table2_settings(task):
    """[RSA App. E.2]: 3 layers, 5 heads, embedding size 20, Adam at 0.005 halved every 5
    epochs, 25 epochs without early stopping; the tested weights are the last epoch's."""
    cfg = resolve("transformer", task)
    m, t = cfg["model"]["params"], cfg["train"]
    assert (m["n_layers"], m["n_heads"], m["d_model"]) == (3, 5, 20)
    assert (t["optimizer"], t["lr"], t["schedule"], t["step_every_epochs"], t["step_gamma"]) == ("adam", 0.005, "step", 5, 0.5)
    assert t["max_epochs"] == 25 and t["patience"] == 0
    assert "select" in TRAIN_DEFAULTS and t["select"] == "last"
    assert resolve("transformer", task, "small")["train"]["select"] == TRAIN_DEFAULTS["select"]  # paper preset only


@pytest.mark.parametrize(
    "model, kinds",
    [
        ("rsa-transformer-I", [5, 0, 0, 0, 0, 0]),
        ("rsa-transformer-II", [3, 0, 0, 2, 0, 0]),
        ("rsa-transformer-III", [3, 1, 1, 0, 0, 0]),
        ("rsa-transformer-IV", [3, 0, 0, 0, 1, 1]),
    ],
)
def test_rsa_table2_cases(model, kinds):
    """[RSA Table 2] cases I-IV: (k1, ..., k6) over 5 heads."""
    cfg = resolve(model, "parity")
    assert cfg["model"]["params"]["rsa"]["kinds"] == kinds and cfg["model"]["params"]["n_heads"] == 5


@pytest.mark.conformance(task="task")
@pytest.mark.parametrize("task", LANGUAGES)
def test_rsa_table2_data_sizes(task):
    """[RSA App. E.2]: train and bin 0 in [2, 50] ([2, 100] for D_n), bin 1 in [51, 100]
    ([101, 200]); 10k train / 2k per bin (D_n: 5k / 1k)."""
    t = bench.build_task(task, preset="paper")
    dn = task.startswith("d")
    assert (t.min_len, t.max_len, t.bin1_max_len) == ((2, 100, 200) if dn else (2, 50, 100))
    assert (t.n_train, t.n_test) == ((5000, 1000) if dn else (10000, 2000))


def test_nope_keeps_no_positions_at_the_formal_paper_preset():
    """The sinusoidal override reaches every entry based on transformer; nope must stay NoPE."""
    assert resolve("nope", "parity")["model"]["params"]["pos_encoding"] == "none"
    assert isinstance(bench.build_model("nope", task="parity", preset="paper"), NoPE)


def test_transformer_star_is_a_transformer_with_dai_relative_positions():
    """[RSA §4.2] Transformer* = the vanilla Transformer with its absolute PE replaced by the
    learnable relative PE of Dai et al. 2019. With the relative terms (W_R, u, v) zeroed it must
    compute exactly a Transformer without positions (same blocks, embedding, final LN), on any
    input length the formal languages have (one segment, no memory)."""
    cfg = resolve("transformer-star", "d4")
    p = cfg["model"]["params"]
    assert cfg["model"]["target"] == "bench.models.xl:TransformerXL" and p["mem_len"] == 0
    assert p["segment_len"] >= bench.build_task("d4", preset="paper").bin1_max_len
    star = bench.build_model("transformer-star", task="d4", preset="paper").eval()
    plain = Transformer(star.vocab_size, True, d_model=20, n_heads=5, n_layers=3, d_ff=80, dropout=0.0, pos_encoding="none").eval()
    src = dict(star.named_parameters())
    with torch.no_grad():
        for name, param in plain.named_parameters():
            theirs = name.replace("embed.embed.", "embed.").replace("blocks.", "layers.").replace(".attn.", ".attn.mha.")
            param.copy_(src[theirs])
        for name, param in star.named_parameters():
            if name.endswith(("attn.u", "attn.v", "attn.r_proj.weight")):
                param.zero_()
    torch.manual_seed(0)
    tokens = torch.randint(1, star.vocab_size, (3, 180))
    mask = torch.ones_like(tokens, dtype=torch.bool)
    mask[1, 150:] = False
    tokens[~mask] = 0
    with torch.no_grad():
        a, b = star(tokens, mask).hidden, plain(tokens, mask).hidden
    assert torch.allclose(a[mask], b[mask], atol=1e-5)


def test_transformer_star_positions_are_what_orders_its_input():
    """A one-layer causal stack without positions cannot see the order of the prefix at the last
    position [NOPE]; Transformer*'s relative positions can."""
    torch.manual_seed(1)
    star = bench.build_model("transformer-star", task="parity", preset="paper", n_layers=1).eval()
    nope = bench.build_model("nope", task="parity", preset="paper", n_layers=1).eval()
    tokens = torch.tensor([[1, 1, 2, 1, 2, 2, 2, 1]])
    permuted = torch.tensor([[2, 1, 2, 2, 1, 2, 1, 1]])  # same multiset, same last token
    with torch.no_grad():
        assert torch.allclose(nope(tokens).hidden[0, -1], nope(permuted).hidden[0, -1], atol=1e-5)
        assert not torch.allclose(star(tokens).hidden[0, -1], star(permuted).hidden[0, -1], atol=1e-3)


# ---- formal-language data as Bhattamishra et al.'s generator draws it ---------------------------


def strings(task, split):
    d = task.generate(split, np.random.default_rng(task.split_seed(split)))
    return ["".join(task.vocab[t] for t in toks) for toks in d["tokens"]]


@pytest.mark.conformance(task="task")
@pytest.mark.parametrize("task", LANGUAGES)
def test_train_val_and_bin0_are_disjoint(task):
    """The source splits train and bin 0 from one de-duplicated pool: no test string is trained on."""
    t = bench.build_task(task, preset="small", n_train=1500, n_val=200, n_test=300)
    train, val, bin0 = (set(strings(t, s)) for s in ("train", "val", "bin0"))
    assert (len(train), len(val), len(bin0)) == (1500, 200, 300)
    assert not train & bin0 and not train & val and not val & bin0


def _stop_probs(lo, hi):
    """Bhattamishra et al.: each step stops with s = 1 / (1 + L), L = (lo + hi) // 2, cut at hi.
    Returns (P(exactly n symbols) for n < hi, P(reaching hi))."""
    s = 1 / (1 + (lo + hi) // 2)
    return (lambda n: (1 - s) ** n * s), (1 - s) ** hi


def test_parity_bin1_share_at_the_maximum_length():
    """Parity bin 1 [51, 100]: a string reaching 100 is kept if even (1/2); an odd string of 99
    becomes 100 with the appended 1; odd strings of 51..98 move up by one, none is lost."""
    p, p_hi = _stop_probs(51, 100)
    at_hi = p_hi / 2 + p(99) / 2
    kept = sum(p(n) for n in range(51, 100)) + p_hi / 2
    expected = at_hi / kept  # 0.359
    got = np.mean([len(s) == 100 for s in strings(bench.build_task("parity", preset="paper"), "bin1")])
    assert abs(got - expected) < 0.035  # 2000 strings: 3 standard deviations


def test_tomita5_bin1_share_at_the_maximum_length():
    """Tomita 5 keeps a string iff #0 and #1 are even: probability 1/2 at even lengths, 0 at odd."""
    p, p_hi = _stop_probs(51, 100)
    expected = p_hi / (sum(p(n) for n in range(52, 100, 2)) + p_hi)  # 0.70
    got = np.mean([len(s) == 100 for s in strings(bench.build_task("tomita5", preset="paper"), "bin1")])
    assert abs(got - expected) < 0.035


def test_tomita3_strings_are_a_few_long_runs():
    """The source fills a uniform length with runs whose lengths are uniform over what is left,
    so a string has ~3 runs; a uniform walk over Tomita 3 strings would have ~length/2."""
    got = strings(bench.build_task("tomita3", preset="small", n_train=1000), "train")
    runs = [len(re.findall("0+|1+", s)) for s in got]
    assert np.mean(runs) < 4.5 and np.mean([len(s) for s in got]) > 20


# ---- [HALT App. A]: ListOps, logic, flip-flop, LRA --------------------------------------------


@pytest.mark.conformance(family="model", task="task")
@pytest.mark.parametrize("task", LRA)
@pytest.mark.parametrize("model", GUTS)
def test_gut_upper_bound_on_lra_is_15(model, task):
    """[HALT App. A] "For LRA tasks ... For GUT, we use an upperbound layer as 15"."""
    assert resolve(model, task)["model"]["params"]["max_layers"] == 15


@pytest.mark.conformance(family="model")
@pytest.mark.parametrize("model", UTS)
def test_logic_settings(model):
    """[HALT App. A]: batch 256, lr 7e-4, AdamW wd 0.1, linear warm-up 4000, UT/GUT bound 15, beta 0."""
    cfg = resolve(model, "logic")
    m, t = cfg["model"]["params"], cfg["train"]
    assert (m["max_layers"], m["beta"]) == (15, 0.0)
    assert (t["batch_size"], t["lr"], t["optimizer"], t["weight_decay"], t["warmup_steps"]) == (256, 7e-4, "adamw", 0.1, 4000)


@pytest.mark.conformance(family="model")
@pytest.mark.parametrize("model", CHUNKED)
def test_logic_and_flipflop_chunking(model):
    """[HALT App. A]: chunk size 10 and 10 memory slots for TLB / GUTLB, in logic and in flip-flop."""
    for task in ("logic", "flipflop"):
        p = resolve(model, task)["model"]["params"]
        assert (p["chunk_size"], p["memory_slots"]) == (10, 10)


@pytest.mark.conformance(family="model")
@pytest.mark.parametrize("task", ["listops", "lra-listops"])
@pytest.mark.parametrize("model", MODELS)
def test_chunk_models_take_the_reference_tlb_optimisation_on_listops(model, task):
    """[HALT App. A] "We use the same hyperparameters for TLB in ListOps as used in LRA ListOps for TLB
    in the original repository": TLB_config lr 0.05/4, rootwarmup, warm-up 8000 (configs/listopsc2_configs.py,
    listops_lra_configs.py), = inverse_sqrt at 0.05/4/sqrt(8000); GUTLB_config inherits it, so do the
    entries based on tlb (every chunk model of TLB's loop). Every other family (the Transformer, UT and GUT among
    them) keeps Transformer_config's 0.05/sqrt(1000), warm-up 1000."""
    t = resolve(model, task)["train"]
    if model in CHUNKED:
        assert (t["lr"], t["warmup_steps"], t["schedule"]) == (round(0.05 / 4 / 8000**0.5, 8), 8000, "inverse_sqrt")
        assert (t["betas"], t["weight_decay"], t["batch_size"]) == ([0.9, 0.98], 0.1, 32)
    else:
        assert (t["lr"], t["warmup_steps"]) == (0.00158, 1000)


@pytest.mark.conformance(family="model")
@pytest.mark.parametrize("model", MODELS)
def test_chunk_models_take_the_reference_tlb_optimisation_on_lra(model):
    """TLB_config of each LRA config (GUTLB_config inherits it), where it differs from Transformer_config:
    Text and Retrieval lr 0.025 rootwarmup 8000 (Retrieval batch 128 = 32 x 4 accumulated, as every
    family there); Image lr 1e-3; Pathfinder lr 5e-4, batch 512, betas (0.9, 0.98), cosine2 with warm-up
    160000 // 512, no clipping, 200 epochs, patience 200 (every chunk model of TLB's loop); every other family
    keeps Transformer_config's."""
    text, retrieval, image, path = (resolve(model, t)["train"] for t in ("lra-text", "lra-retrieval", "lra-image", "lra-pathfinder"))
    if model in CHUNKED:
        assert (text["lr"], text["warmup_steps"]) == (retrieval["lr"], retrieval["warmup_steps"]) == (round(0.025 / 8000**0.5, 8), 8000)
        assert retrieval["batch_size"] * retrieval["accumulate_grad_batches"] == 128
        assert (image["lr"], image["batch_size"], image["schedule"]) == (1e-3, 256, "cosine")
        assert (
            path["lr"],
            path["batch_size"],
            path["betas"],
            path["schedule"],
            path["warmup_steps"],
            path["grad_clip"],
            path["max_epochs"],
            path["patience"],
            path["weight_decay"],
        ) == (5e-4, 512, [0.9, 0.98], "cosine", 160000 // 512, 0.0, 200, 200, 0.0)
    else:
        assert [text["lr"], retrieval["lr"], image["lr"], path["lr"]] == [0.00056, 0.00056, 5e-4, 2e-4]
        assert path["schedule"] == "linear"


def test_flipflop_reports_last_read_accuracy_first():
    """[HALT §6.6] "We show the accuracy of the models in predicting the last read value"."""
    assert FlipFlop.report_metrics[0] == "last_acc"
    t = bench.build_task("flipflop", preset="paper")
    assert (t.n_train, t.n_test, t.n_val_each, t.train_len, t.train_p_i) == (160000, 10000, 1000, 512, 0.8)
    assert (t.test_lens, t.test_p_i) == ([512, 1024], [0.1, 0.8, 0.98])


def test_logic_paper_data():
    """[HALT Table 2]: train on <= 6 operators, test 7..12 (Bowman's files train0..6 / test7..12)."""
    t = bench.build_task("logic", preset="paper")
    assert t.train_max_ops == 6 and t.test_splits() == [f"ops{k}" for k in range(7, 13)]


# ---- [RSA §4.4, App. E.4, Fig. 5]: copy ---------------------------------------------------------


def test_copy_s_and_l_differ_only_in_training_size():
    """[RSA Fig. 5]: S = 6400 training sequences, L = 12800; everything else the same."""
    for model in ("rsa-brt", "tlb"):
        s, l = resolve(model, "copy-s"), resolve(model, "copy-l")
        assert (s["task"]["params"]["n_train"], l["task"]["params"]["n_train"]) == (6400, 12800)
        assert s["model"] == l["model"] and s["train"] == l["train"]
        assert {**s["task"]["params"], "n_train": 0} == {**l["task"]["params"], "n_train": 0}
    m, t = s["model"]["params"], s["train"]
    assert (m["n_layers"], m["n_heads"]) == (4, 8)  # [RSA App. E.4]
    assert (t["batch_size"], t["optimizer"], t["lr"], t["schedule"], t["step_every_epochs"], t["step_gamma"]) == (
        16,
        "adam",
        1e-4,
        "step",
        5,
        0.5,
    )


@pytest.mark.parametrize("task", ["copy-s", "copy-l"])
def test_copy_protocol_one_model_per_maximum_length(task):
    """A model trained on lengths up to L is tested at L: the preset's L = 512, any other by --set."""
    assert bench.build_task(task, preset="paper").test_splits() == ["len512"]
    for length in (128, 256, 384):
        t = bench.build_task(task, preset="paper", max_len=length)
        assert t.test_splits() == [f"len{length}"]
        lengths = t.generate("train", np.random.default_rng(0))["length"]
        assert max(lengths) <= length


def test_every_paper_preset_resolves_for_every_model_it_sizes():
    """Each family a paper preset names resolves on that task (no stray keys, no broken merges)."""
    for task in REG.task_names():
        entry = REG.task_entry(task)
        if "paper" not in entry["presets"]:
            continue
        for fam in entry["presets"]["paper"].get("family") or {}:
            resolve(fam, task)


# ---- a family fits its own values to a preset's generic sizes (Backbone.adapt) ----------------------


@pytest.mark.parametrize(
    "kinds, dilations, n_heads, fitted",
    [
        # [RSA Table 2]'s 5-head cases on 4 heads: one regular head goes (what the presets stated by hand before)
        ([5, 0, 0, 0, 0, 0], [], 4, ([4, 0, 0, 0, 0, 0], [])),
        ([3, 0, 0, 2, 0, 0], [2, 2], 4, ([2, 0, 0, 2, 0, 0], [2, 2])),
        ([3, 1, 1, 0, 0, 0], [], 4, ([2, 1, 1, 0, 0, 0], [])),
        ([3, 0, 0, 0, 1, 1], [2, 2], 4, ([2, 0, 0, 0, 1, 1], [2, 2])),
        # a sum that is a multiple of n_heads, every count dividing by it: scaled down, dilated heads' factors kept
        ([4, 2, 2, 0, 0, 0], None, 4, ([2, 1, 1, 0, 0, 0], None)),
        ([4, 0, 0, 4, 0, 0], [3, 3, 3, 3], 4, ([2, 0, 0, 2, 0, 0], [3, 3])),
        # counts that do not divide: the regular heads go ([2, 1, 1] on 2 heads keeps its cyclical pair)
        ([2, 1, 1, 0, 0, 0], None, 2, ([0, 1, 1, 0, 0, 0], None)),
        # kinds that fit stay (fewer: the other heads are plain, [RSA Table 7]); too few regular heads: the layer refuses
        ([2, 1, 1, 0, 0, 0], [], 4, None),
        ([2, 1, 1, 0, 0, 0], [], 8, None),
        ([0, 3, 3, 0, 0, 0], [], 4, None),
    ],
)
def test_rsa_kinds_fit_the_heads_they_are_given(kinds, dilations, n_heads, fitted):
    from bench.models.layers.rsa import fit_kinds

    assert fit_kinds(kinds, dilations, n_heads) == fitted


@pytest.mark.parametrize("task", ["copy", "parity", "listops", "mqar", "modular-arithmetic", "s5", "lra-text"])
@pytest.mark.parametrize(
    "model, kinds",
    [
        ("rsa-transformer-I", [4, 0, 0, 0, 0, 0]),
        ("rsa-transformer-II", [2, 0, 0, 2, 0, 0]),
        ("rsa-transformer-III", [2, 1, 1, 0, 0, 0]),
        ("rsa-transformer-IV", [2, 0, 0, 0, 1, 1]),
    ],
)
def test_rsa_table2_cases_on_4_head_presets_lose_one_regular_head(model, task, kinds):
    """No preset states the Table 2 cases' kinds for 4 heads: the Transformer fits them, and `bench
    explain` names it as their source; the dilations stay the entry's."""
    run = resolve_run(REG, model, task, "smoke")
    assert run.model.params["n_heads"] == 4 and run.model.params["rsa"]["kinds"] == kinds
    assert run.model.sources["rsa.kinds"] == "adapted to n_heads=4 by Transformer"
    assert run.model.sources["rsa.dilations"] == f"registry entry {model}"


def test_a_preset_family_value_and_set_win_over_what_a_family_adapts():
    """Copy's paper preset states [4, 2, 2] for the 8-head RSA hosts: stated, it wins even where it
    would not fit; on ListOps' paper preset (8 heads, no kinds stated) --set model.n_heads=2 refits
    case III's (3, 1, 1), and --set model.rsa.kinds wins over that."""
    paper = resolve_run(REG, "rsa-transformer", "copy", "paper")
    assert paper.model.params["rsa"]["kinds"] == [4, 2, 2, 0, 0, 0] and paper.model.sources["rsa.kinds"].startswith(
        "preset copy.paper.family"
    )
    four = resolve_run(REG, "rsa-xl", "copy", "paper", ["model.n_heads=4"])
    assert four.model.params["rsa"]["kinds"] == [4, 2, 2, 0, 0, 0]  # the preset's family value, stated: it wins
    assert resolve_run(REG, "rsa-transformer-III", "listops", "paper").model.params["rsa"]["kinds"] == [3, 1, 1, 0, 0, 0]
    mine = resolve_run(REG, "rsa-transformer-III", "listops", "paper", ["model.n_heads=2"])
    assert (
        mine.model.params["rsa"]["kinds"] == [0, 1, 1, 0, 0, 0] and mine.model.sources["rsa.kinds"] == "adapted to n_heads=2 by Transformer"
    )
    given = resolve_run(REG, "rsa-transformer-III", "listops", "paper", ["model.n_heads=2", "model.rsa.kinds=[2,0,0,0,0,0]"])
    assert given.model.params["rsa"]["kinds"] == [2, 0, 0, 0, 0, 0] and given.model.sources["rsa.kinds"] == "--set"


def test_what_a_family_adapts_is_settled_once():
    """Resolution ends where the family has nothing left to adapt: every model on every task's smoke
    preset, its resolved params handed back to its class's ``adapt``, gives nothing."""
    for task in REG.task_names():
        if "smoke" not in REG.task_entry(task)["presets"]:
            continue
        for model in REG.model_names():
            run = resolve_run(REG, model, task, "smoke")
            assert run.model.cls.adapt(run.model.params, run.task.values) == [], (model, task)
