"""Chapter 11 away from its records (Colab), at toy size.

With ``book/records/ch11_budget.json`` present (here, and in nbval) the chapter trains only the
decoder-only model and reads the encoder–decoder's runs from the record; without it (a Colab
runtime: the pip-installed package carries no records) it trains both for the same time. nbval
never takes that second branch, so this test runs the chapter's own cells of section 11.3, from
the training to the generation cost, with a tiny configuration and no record.
"""
import dataclasses
import warnings

import pytest

from conftest import chapter_cells

CELLS = {  # a line that marks each cell of the chapter this test runs, in order
    "imports": "from tf_tutorial.book.records import corpus_version, load_record",
    "train": "gpt_run = train_continuation(gpt, vocab, corpus.train, gpt_train_cfg,",
    "figure": "def smooth(v, w=15):",
    "scores": "gpt_ev = {k: evaluate_continuation(gpt, vocab, v)",
    "claims": 'variants = load_record("ch12_variants.json")',
    "counting": "def counting_attention():",
    "cost": "def ed_first_token():",
}


@pytest.fixture(scope="module")
def section():
    cells = chapter_cells("ch11_decoder_only", CELLS)
    ns: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # plt.show() on Agg
        exec(cells["imports"], ns)
        # the time limit the chapter hands train() is recorded, then set aside: the encoder-decoder
        # runs to its configuration's steps, so what this test sees does not depend on the clock
        real_train, limits = ns["train"], []

        def train(*args, max_seconds=None, **kwargs):
            limits.append(max_seconds)
            return real_train(*args, **kwargs)

        ns["train"], ns["limits"] = train, limits
        exec("""
from tf_tutorial.corpus.data import make_corpus
# the chapter's layer counts (2 + 2 against 5: its cost cell checks formulas with them), tiny widths
cfg = dataclasses.replace(CONFIGS["tiny"], d_model=16, d_ff=32, n_layers=2, norm_first=True,
                          warmup=2, steps=200)
corpus = make_corpus(300, n_valid=20, n_test=20, n_longer=10, n_deeper=10, seed=0)
src_vocab, tgt_vocab = corpus.src_vocab, corpus.tgt_vocab
vocab = continuation_vocab(src_vocab, tgt_vocab)
gpt_cfg = GPTConfig(len(vocab), d_model=16, n_heads=2, n_layers=5, d_ff=32, max_len=256,
                    pad_id=vocab.pad_id, eos_id=vocab.eos_id, norm_first=True,
                    positions="sinusoidal", activation="relu")
torch.manual_seed(cfg.seed)
gpt = GPT(gpt_cfg)
ed = Transformer(cfg.model_config(corpus))
n_gpt, n_ed = count_parameters(gpt), count_parameters(ed)
device = torch.device("cpu")
budget = None                      # what the chapter's budget cell finds on Colab
gpt_train_cfg = dataclasses.replace(cfg, steps=20)   # the figure smooths over 15 steps
ed_cfg = cfg
macs_gpt, macs_ed = 1.96, 1.0      # 11.2's count of the multiply-adds (not run here)
""", ns)
        for name in ("train", "figure", "scores", "claims", "counting", "cost"):
            exec(cells[name], ns)
    return ns


def test_without_a_record_both_models_train_here_for_the_same_time(section):
    gpt_hist, ed_hist = section["gpt_hist"], section["ed_hist"]
    assert gpt_hist["step"][-1] == 20 == section["same"]
    # the encoder-decoder trained live: stopped at the decoder-only model's last step (to be
    # scored there), then resumed with the rest of the decoder-only model's time
    assert section["ed_early"].history["step"][-1] == 20
    early_limit, rest_limit = section["limits"]
    assert early_limit is None
    assert rest_limit == pytest.approx(gpt_hist["seconds"] - section["ed_early"].history["seconds"])
    assert len(ed_hist["loss"]) == ed_hist["step"][-1] == 200
    # the curve and the table show the resumed run, which carries the first 20 steps on
    assert ed_hist is section["ed_run"].history and ed_hist["step"][:20] == list(range(1, 21))


def test_without_a_record_the_scores_and_the_cost_count_come_from_this_run(section):
    splits = section["splits"]
    assert set(section["ed_ev"]) == set(section["gpt_ev"]) == set(splits)
    # the table scores the resumed (last) model; the same-step row scores the stopped one
    ns = section
    for model, scored in ((ns["ed_run"].model, ns["ed_ev"]["test"]),
                          (ns["ed_early"].model, ns["ed_at_same"])):
        again = ns["evaluate"](model, ns["corpus"].test, ns["src_vocab"], ns["tgt_vocab"])
        assert again["hyps"] == scored["hyps"]             # the translations of that model
    assert ns["ed_ev"]["test"]["hyps"] != ns["ed_at_same"]["hyps"]   # two models, told apart
    assert section["T_ed"] == section["T_gpt"] == section["T1"]
    # the decoder-only model reads the prompt in all 5 layers, the encoder-decoder in 2
    assert section["attn_gpt"] > section["attn_ed"]
    # the three-seed verdict needs the records: without them it is left out, the one-run gap is not
    assert "ed_em" not in section and "gap" in section
