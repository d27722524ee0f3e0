"""Greedy and beam search with the KV cache: same tokens as recomputation, EOS, batching."""
import pytest
import torch

from tf_tutorial.decode import (attention_maps, beam_search, decode_step, greedy_decode, length_penalty, log_prob,
                                strip, top_k_mask, translate)
from tf_tutorial.corpus.data import Vocab
from tf_tutorial.model import Transformer, TransformerConfig

EOS = 2


@pytest.fixture(scope="module", params=[False, True], ids=["post-ln", "pre-ln"])
def model(request):
    torch.manual_seed(3)
    cfg = TransformerConfig(31, 27, d_model=24, n_heads=3, n_layers=2, d_ff=40, dropout=0.0,
                            norm_first=request.param, max_len=64, tie_output=False)
    m = Transformer(cfg).double().eval()
    with torch.no_grad():   # a spread-out output layer, so that different prefixes pick different tokens
        m.out.weight.mul_(4.0)
    return m


@pytest.fixture
def src():
    torch.manual_seed(4)
    s = torch.randint(4, 31, (3, 9))
    s[1, 6:] = 0
    s[2, 3:] = 0
    return s


def test_cache_gives_the_same_tokens_as_recomputation(model, src):
    cached, full = greedy_decode(model, src, max_len=15), greedy_decode(model, src, max_len=15, use_cache=False)
    assert cached.shape == (3, 15)
    assert torch.equal(cached, full)
    assert len(set(map(tuple, cached.tolist()))) >= 2          # not one token repeated everywhere
    assert torch.equal(beam_search(model, src, 3, max_len=15), beam_search(model, src, 3, max_len=15, use_cache=False))


def test_beam_of_one_is_greedy(model, src):
    assert torch.equal(beam_search(model, src, beam_size=1, max_len=12), greedy_decode(model, src, max_len=12))


def test_top_k_mask_takes_the_k_largest_and_of_equal_values_the_first():
    """Against a stable descending sort, on small integers (many ties) with -inf among them."""
    g = torch.Generator().manual_seed(0)
    for _ in range(300):
        n = int(torch.randint(1, 30, (1,), generator=g))
        k = int(torch.randint(1, n + 1, (1,), generator=g))
        x = torch.randint(-3, 3, (2, 3, n), generator=g).float()
        x[x == -3] = float("-inf")
        expected = torch.zeros_like(x, dtype=torch.bool).scatter(
            -1, x.sort(dim=-1, descending=True, stable=True).indices[..., :k], True)
        assert torch.equal(top_k_mask(x, k), expected), (x, k)
    assert top_k_mask(torch.tensor([2.0, 5.0, 5.0, 5.0, 1.0]), 2).tolist() == [False, True, True, False, False]


def test_top_k_mask_names_a_k_the_rows_cannot_give():
    x = torch.randn(2, 3)
    assert top_k_mask(x, 3).all()                          # k = n: every value
    for k in (0, 4, -1):     # was torch's 'selected index k out of range' or a size mismatch
        with pytest.raises(ValueError, match=rf"^k must be an integer from 1 to x's last dimension 3, "
                                             rf"but got {k} \(x has shape \(2, 3\)\)$"):
            top_k_mask(x, k)
    for k in (2.0, True):
        with pytest.raises(TypeError, match=rf"^k must be an integer .* but got {k}"):
            top_k_mask(x, k)
    with pytest.raises(ValueError, match=r"^x: expected shape \(\.\.\., n\)"):
        top_k_mask(torch.tensor(1.0), 1)


@pytest.mark.parametrize("tied", ["all", "some"])
def test_beam_of_one_is_greedy_when_scores_tie(src, tied):
    """Equal scores go to the lowest id in both searches, as argmax takes (topk's order among ties is arbitrary)."""
    torch.manual_seed(5)
    m = Transformer(TransformerConfig(31, 27, d_model=24, n_heads=3, n_layers=2, d_ff=40, dropout=0.0,
                                      max_len=64, tie_output=False)).double().eval()
    with torch.no_grad():
        m.out.weight.zero_()
        if tied == "some":     # ids 9..20 share one row: they tie with each other, not with the rest
            m.out.weight[9:21] = torch.randn(24, dtype=torch.float64)
    greedy = greedy_decode(m, src, max_len=8)
    assert torch.equal(beam_search(m, src, beam_size=1, max_len=8), greedy)
    assert torch.equal(beam_search(m, src, beam_size=1, max_len=8, use_cache=False), greedy)
    if tied == "all":
        assert greedy.tolist() == [[EOS]] * 3                 # the first id it may emit


@pytest.mark.parametrize("use_cache", [True, False])
def test_an_empty_batch_decodes_to_an_empty_batch(model, src, use_cache):
    empty = src[:0]                                          # (0, S)
    assert greedy_decode(model, empty, 5, use_cache=use_cache).shape == (0, 0)
    assert beam_search(model, empty, 3, 5, use_cache=use_cache).shape == (0, 0)


def test_beam_output_is_as_wide_as_its_longest_winner(model, src):
    """The losing beams may run on after the winners end; their columns are not returned. Before,
    a one-token winner came back padded to the longest beam, so beam and greedy differed in width
    even when they chose the same sentence."""
    def force_eos(module, inputs, out):
        out = out.clone()
        out[..., EOS] += 1e3
        return out
    handle = model.out.register_forward_hook(force_eos)
    try:
        beam, greedy = beam_search(model, src, beam_size=3, max_len=10), greedy_decode(model, src, max_len=10)
    finally:
        handle.remove()
    assert torch.equal(beam, greedy) and beam.tolist() == [[EOS]] * 3
    for k in (2, 4):   # untouched: some row fills the last column
        ids = beam_search(model, src, beam_size=k, max_len=12)
        assert (ids[:, -1] != model.config.pad_id).any(), ids


def test_eos_stops_a_sentence_and_pads_after_it(model, src):
    def force_eos_row0(module, inputs, out):
        out = out.clone()
        out[0, ..., EOS] += 1e3
        return out
    handle = model.out.register_forward_hook(force_eos_row0)
    try:
        for ids in (greedy_decode(model, src, max_len=10), beam_search(model, src, beam_size=2, max_len=10)):
            assert ids[0].tolist() == [EOS] + [0] * (ids.shape[1] - 1)
            assert ids.shape[1] <= 10
            assert (ids[1:] != EOS).any()
    finally:
        handle.remove()
    assert strip(torch.tensor([[5, 6, EOS, 0], [7, 8, 9, 4]]), EOS) == [[5, 6], [7, 8, 9, 4]]


def test_batch_decoding_equals_one_sentence_at_a_time(model, src):
    batch_g, batch_b = greedy_decode(model, src, max_len=10), beam_search(model, src, 3, max_len=10)
    for i in range(3):
        one = src[i:i + 1, :int((src[i] != 0).sum())]                # no padding at all
        g, b = greedy_decode(model, one, max_len=10), beam_search(model, one, 3, max_len=10)
        assert torch.equal(g[0], batch_g[i, :g.shape[1]])
        assert torch.equal(b[0], batch_b[i, :b.shape[1]])


def test_length_penalty_and_bad_arguments(model, src):
    assert length_penalty(torch.tensor(1), 0.6).item() == pytest.approx(1.0)
    assert length_penalty(torch.tensor(7), 0.6).item() == pytest.approx(2.0 ** 0.6)
    with pytest.raises(ValueError, match=r"max_len must be in \[1, 64\] \(the model.s max_len\), but got 100$"):
        greedy_decode(model, src, max_len=100)
    with pytest.raises(ValueError, match="beam_size must be a positive integer, but got 0"):
        beam_search(model, src, beam_size=0)
    with pytest.raises(ValueError, match="beam_size must be a positive integer, but got True"):
        beam_search(model, src, beam_size=True)    # a bool is not a size
    with pytest.raises(ValueError, match=r"^eos_id=0 is the pad_id: decoding could never tell"):
        greedy_decode(model, src, eos_id=model.config.pad_id)
    with pytest.raises(TypeError, match=r"^bos_id must be an integer token id, but got 'a'$"):
        beam_search(model, src, bos_id="a")
    for bad in (3.0, True):                        # range(3.0) failed inside; True read as 1
        with pytest.raises(ValueError, match=f"^max_len must be a positive integer, but got {bad}$"):
            greedy_decode(model, src, max_len=bad)
    for bad in ("x", -0.5, float("nan"), None):    # "x" failed only after the whole search
        with pytest.raises(ValueError, match=f"^alpha must be a finite number >= 0, but got {bad!r}$"):
            beam_search(model, src, alpha=bad)


@pytest.mark.parametrize("decode", [greedy_decode, beam_search])
def test_a_bos_id_the_config_would_refuse_is_refused(model, src, decode):
    """bos_id = pad_id: recomputation masked BOS as padding and the cache did not, so the two differed."""
    pad = model.config.pad_id
    with pytest.raises(ValueError, match=rf"^bos_id={pad} is the pad_id: the decoder would mask"):
        decode(model, src, bos_id=pad, eos_id=-1, max_len=5)
    with pytest.raises(ValueError, match=r"^bos_id=2 and eos_id=2 must be different ids$"):
        decode(model, src, bos_id=2, eos_id=2, max_len=5)
    cached = decode(model, src, bos_id=3, eos_id=-1, max_len=5)   # any other id: both paths agree
    assert torch.equal(cached, decode(model, src, bos_id=3, eos_id=-1, max_len=5, use_cache=False))


def test_attention_maps_shapes_and_rows(model, src):
    tgt_in = torch.cat([torch.ones(3, 1, dtype=torch.long), greedy_decode(model, src, max_len=6)[:, :-1]], 1)
    maps = attention_maps(model, src, tgt_in)
    assert len(maps["cross"]) == len(maps["self"]) == 2
    cross, self_ = maps["cross"][0], maps["self"][1]
    assert cross.shape == (3, 3, 6, 9) and self_.shape == (3, 3, 6, 6)
    assert torch.allclose(cross.sum(-1), torch.ones(3, 3, 6, dtype=cross.dtype))
    assert (cross[2, :, :, 3:] == 0).all()                               # padded source keys
    assert (self_.triu(1) == 0).all()                                   # no future target keys


def test_translate_maps_unknown_words_to_unk_and_says_so(model, capsys):
    src_vocab = Vocab([f"w{i}" for i in range(24)] + ["I", "love", "."])
    tgt_vocab = Vocab([f"z{i}" for i in range(23)])
    out = translate(model, ["I love Narnia .", "I love w3 ."], src_vocab, tgt_vocab)
    assert len(out) == 2 and all(isinstance(o, str) for o in out)
    printed = capsys.readouterr().out
    assert printed.count("注意") == 1 and "['Narnia']" in printed and "'I love w3 .'" not in printed
    # Narnia becomes <unk> in its place (not dropped), and the output is that source's
    from tf_tutorial.translate import Translator
    ids = Translator(model, src_vocab, tgt_vocab).encode("I love Narnia .", warn=False)
    assert ids == [src_vocab.stoi["I"], src_vocab.stoi["love"], src_vocab.unk_id, src_vocab.stoi["."],
                   src_vocab.eos_id]
    assert out[0] == " ".join(tgt_vocab.decode(greedy_decode(model, torch.tensor([ids]))[0]))


# --- the cache lives in the layers: one data path, equal to recomputation ----------------------

def _full_logits(model, src, tgt):
    memory, src_mask = model.encode(src)
    return model.decode(tgt, memory, src_mask)                                  # (B, T, V)


def test_cached_steps_give_the_same_logits_as_recomputation(model, src):
    torch.manual_seed(5)
    tgt = torch.randint(4, 27, (3, 8))
    tgt[:, 0] = 1
    full = _full_logits(model, src, tgt)
    memory, src_mask = model.encode(src)
    cache = model.new_cache()
    steps = torch.stack([decode_step(model, tgt[:, t], memory, src_mask, cache) for t in range(8)], dim=1)
    assert cache.length == 8
    assert torch.allclose(steps, full, atol=1e-6, rtol=0)
    assert (full[1] - full[0]).abs().max() > 1e-2            # the rows really differ (padding in src)


def test_positions_start_where_the_cache_ends(model, src):
    torch.manual_seed(6)
    tgt = torch.randint(4, 27, (3, 7))
    full = _full_logits(model, src, tgt)
    memory, src_mask = model.encode(src)
    cache = model.new_cache()
    first = model.decode(tgt[:, :4], memory, src_mask, cache=cache)            # a prefix of 4 at once
    rest = model.decode(tgt[:, 4:], memory, src_mask, cache=cache)             # then 3 more together
    assert torch.allclose(torch.cat([first, rest], 1), full, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="tgt_in: 58 tokens after 7 cached ones exceed the model.s max_len=64"):
        model.decode(torch.ones(3, 58, dtype=torch.long), memory, src_mask, cache=cache)


def test_cross_attention_keys_are_projected_once(model, src):
    memory, src_mask = model.encode(src)
    cache = model.new_cache()
    calls = []
    handle = model.decoder.layers[0].cross_attn.w_k.register_forward_hook(lambda *a: calls.append(1))
    try:
        for t in range(5):
            decode_step(model, torch.full((3,), 5 + t), memory, src_mask, cache)
    finally:
        handle.remove()
    assert len(calls) == 1
    self_cache, cross_cache = cache.layers[0]
    assert self_cache.k.shape == (3, 3, 5, 8) and cross_cache.k.shape == (3, 3, 9, 8)


def test_a_reordered_cache_follows_its_beams(model, src):
    torch.manual_seed(7)
    tgt = torch.randint(4, 27, (3, 6))
    memory, src_mask = model.encode(src)
    cache = model.new_cache()
    model.decode(tgt[:, :4], memory, src_mask, cache=cache)
    index = torch.tensor([2, 0, 0])                             # as beam search does: survivors, repeated
    cache.reorder(index)
    step = model.decode(tgt[index, 4:], memory[index], src_mask[index], cache=cache)
    full = _full_logits(model, src[index], tgt[index])[:, 4:]
    assert torch.allclose(step, full, atol=1e-6, rtol=0)


def test_decode_py_walks_no_sublayer_by_name():
    import inspect

    import tf_tutorial.decode as decode_module
    text = inspect.getsource(decode_module)
    for name in ("self_block", "cross_block", "ffn_block", "self_attn", "cross_attn", "project_kv", ".layers"):
        assert name not in text, f"decode.py reaches into the decoder's {name}: the cache belongs to the layers"


def test_beam_trace_records_the_search(model, src):
    trace = []
    out = beam_search(model, src, beam_size=3, max_len=6, trace=trace)
    *steps, final = trace
    assert 1 <= len(steps) <= 6
    for t, step in enumerate(steps):
        assert [len(step["tokens"]), len(step["tokens"][0]), len(step["tokens"][0][0])] == [3, 3, t + 1]
        for b in range(3):
            assert step["logp"][b] == sorted(step["logp"][b], reverse=True)        # topk keeps them ordered
    lp = length_penalty(torch.tensor(final["length"]), 0.6)                        # (B, K)
    assert torch.allclose(torch.tensor(final["logp"]) / lp, torch.tensor(final["score"]), atol=1e-5)
    for b in range(3):                                 # the winner is the best normalised score
        best = max(range(3), key=lambda k: final["score"][b][k])
        assert final["tokens"][b][best][:out.shape[1]] == out[b].tolist()


def test_decoding_takes_its_special_ids_from_the_config(model, src):
    import dataclasses
    alt = Transformer(dataclasses.replace(model.config, bos_id=3, eos_id=5)).double().eval()
    alt.load_state_dict(model.state_dict())
    ids = greedy_decode(alt, src, max_len=12)
    assert torch.equal(ids, greedy_decode(model, src, bos_id=3, eos_id=5, max_len=12))
    assert not torch.equal(ids, greedy_decode(model, src, max_len=12))


def test_log_prob_scores_outputs_as_beam_search_does(model, src):
    from tf_tutorial.decode import log_prob
    trace = []
    out = beam_search(model, src[:1], beam_size=3, max_len=10, alpha=0.0, trace=trace)
    assert log_prob(model, src[:1], out).item() == pytest.approx(max(trace[-1]["logp"][0]), abs=1e-9)
    first = greedy_decode(model, src, max_len=1)                      # one token: greedy's is the argmax
    lp = log_prob(model, src, first)
    assert lp.shape == (3,) and (lp <= 0).all()
    for token in range(3, 27):                                         # every other token scores lower
        other = torch.full_like(first, token)
        assert (log_prob(model, src, other)[first[:, 0] != token] < lp[first[:, 0] != token]).all()


def test_decoding_rejects_bad_sources_and_ids_by_name(model, src):
    with pytest.raises(ValueError, match=r"src: expected token ids of shape \(B, S\), but got .*\(9,\)"):
        greedy_decode(model, src[0])
    with pytest.raises(ValueError, match=r"src: expected token ids .* torch.float32"):
        beam_search(model, src.float())
    with pytest.raises(ValueError, match="bos_id=99 is out of range for the target vocabulary of 27 tokens"):
        greedy_decode(model, src, bos_id=99)
    with pytest.raises(ValueError, match="eos_id=27 is out of range"):
        beam_search(model, src, eos_id=27)
    assert greedy_decode(model, src, eos_id=-1, max_len=5).shape == (3, 5)   # never stops early
    for decode in (greedy_decode, beam_search, attention_maps):    # was "'Linear' object has no attribute"
        with pytest.raises(TypeError, match=r"^model: expected a tf_tutorial.model.Transformer .*but got Linear$"):
            decode(torch.nn.Linear(2, 2), src, src)


def test_a_source_on_another_device_than_the_model_is_refused_with_the_fix(model, src):
    # a model on a GPU and ids built on the CPU, played by the CPU and the meta device
    elsewhere = src.to("meta")
    for call in (lambda: greedy_decode(model, elsewhere), lambda: beam_search(model, elsewhere),
                 lambda: log_prob(model, elsewhere, src), lambda: attention_maps(model, elsewhere, src)):
        with pytest.raises(ValueError, match=r"^src is on meta, but the model is on cpu: move it first "
                                             r"\(src.to\('cpu'\)\)$"):
            call()
    with pytest.raises(ValueError, match="^ids is on meta, but the model is on cpu"):
        log_prob(model, src, elsewhere)
    with pytest.raises(ValueError, match="^tgt_in is on meta, but the model is on cpu"):
        attention_maps(model, src, elsewhere)


@pytest.mark.parametrize("decode", [greedy_decode, beam_search], ids=["greedy", "beam"])
def test_decoding_leaves_the_model_in_the_mode_it_found(model, src, decode):
    model.train()
    try:
        decode(model, src, max_len=3)
        assert model.training, "decoding switched a training model to eval mode for good"
        attention_maps(model, src, src[:, :4] % 27)
        assert model.training
    finally:
        model.eval()
    decode(model, src, max_len=3)
    assert not model.training


def test_beam_search_reorders_the_cache_with_its_beams(model, src):
    """Every surviving beam's score is the log-probability of its own tokens.

    When beam search keeps a beam born from another parent, the cache rows, the lengths and
    the finished flags must follow that parent; with a stale cache the next token is scored
    against another beam's past, and its logp no longer equals recomputation's.
    """
    from tf_tutorial.decode import log_prob
    trace = []
    beam_search(model, src, 3, max_len=15, alpha=0.0, trace=trace)
    final = trace[-1]
    for b in range(src.shape[0]):
        for j in range(3):
            toks = final["tokens"][b][j]
            ids = torch.tensor([toks])
            # log_prob counts up to and including the first <eos>. Both sum float32 log-probs
            # (|sum| about 13, where one float32 step is 1e-6) in different orders, so they may
            # differ by a few roundings; a stale cache moves the sum by far more
            assert log_prob(model, src[b:b + 1], ids).item() == pytest.approx(final["logp"][b][j], rel=1e-6)
            length = toks.index(EOS) + 1 if EOS in toks else len(toks)
            assert final["length"][b][j] == length


def test_greedy_stops_when_every_sentence_has_ended_and_has_a_default_limit(model, src):
    full = greedy_decode(model, src, max_len=30, eos_id=-1)           # never stops early
    assert full.shape == (3, 30)
    # an id that every row emits: decoding stops at the step where the last row emits it
    common = set(full[0].tolist()) & set(full[1].tolist()) & set(full[2].tolist())
    token = min(common, key=lambda t: max(row.tolist().index(t) for row in full))
    stop = max(row.tolist().index(token) for row in full) + 1
    early = greedy_decode(model, src, max_len=30, eos_id=token)
    assert early.shape == (3, stop) and stop < 30
    # no limit given: the source length (with its <eos>) + 20, within the model's positions
    S = src.shape[1]
    assert greedy_decode(model, src, eos_id=-1).shape[1] == min(S + 20, model.config.max_len)


@pytest.mark.parametrize("decode", [greedy_decode, lambda m, s, **kw: beam_search(m, s, 3, **kw)],
                         ids=["greedy", "beam"])
def test_a_sentence_never_stopping_gets_its_own_default_limit_in_a_batch(model, src, decode):
    # eos_id=-1: no sentence ends, so each runs to its limit; once that limit was the
    # padded batch's S + 20 for every row, so a short sentence's output depended on its batch-mates
    batch = decode(model, src, eos_id=-1)
    for i in range(3):
        n = int((src[i] != 0).sum())
        one = decode(model, src[i:i + 1, :n], eos_id=-1)
        assert one.shape == (1, n + 20)
        assert torch.equal(batch[i, :n + 20], one[0]) and (batch[i, n + 20:] == 0).all()


@pytest.mark.parametrize("decode", [greedy_decode, lambda m, s, **kw: beam_search(m, s, 3, **kw)],
                         ids=["greedy", "beam"])
def test_max_len_may_give_each_sentence_its_own_limit(model, src, decode):
    import numpy as np
    caps = [4, 9, 6]
    for given in (caps, torch.tensor(caps)):
        out = decode(model, src, eos_id=-1, max_len=given)
        assert out.shape == (3, 9)
        for i, n in enumerate(caps):
            assert torch.equal(out[i, :n], decode(model, src[i:i + 1], eos_id=-1, max_len=n)[0])
            assert (out[i, n:] == 0).all()
    assert decode(model, src, eos_id=-1, max_len=np.int64(5)).shape == (3, 5)   # a NumPy int is an int
    assert decode(model, src, eos_id=-1, max_len=torch.tensor(5)).shape == (3, 5)   # so is a 0-d tensor
    with pytest.raises(TypeError, match=r"but got shape \(\), dtype torch.float32$"):   # and ValueError
        decode(model, src, max_len=torch.tensor(5.0))
    with pytest.raises(ValueError, match=r"^max_len: expected an int or 3 ints \(one per sentence\), "
                                         r"but got \[4, 9\]$") as caught:
        decode(model, src, max_len=[4, 9])
    assert not isinstance(caught.value, TypeError)                  # the right type, the wrong count
    with pytest.raises(ValueError, match=r"but got shape \(3,\), dtype torch.float32$"):
        decode(model, src, max_len=torch.tensor([4.0, 9.0, 6.0]))
    with pytest.raises(ValueError, match=r"^max_len must be in \[1, 64\] \(the model's max_len\), "
                                         r"but got \[0, 9, 65\]$"):
        decode(model, src, max_len=[0, 9, 65])


@pytest.mark.parametrize("use_cache", [True, False])
def test_decoding_may_fill_every_position_the_model_has(model, src, use_cache):
    """max_len tokens need decoder positions 0 .. max_len - 1 only: BOS and the first max_len - 1 written."""
    n = model.config.max_len
    greedy = greedy_decode(model, src, max_len=n, eos_id=-1, use_cache=use_cache)
    assert greedy.shape == (3, n)
    bos = torch.full((3, 1), model.config.bos_id)
    logits = model(src, torch.cat([bos, greedy[:, :-1]], 1))             # teacher-forced: the same choices
    logits[..., [model.config.pad_id, model.config.bos_id]] = float("-inf")  # which decoding never writes
    assert torch.equal(logits.argmax(-1), greedy)
    assert beam_search(model, src, 2, max_len=n, eos_id=-1).shape == (3, n)



def test_max_len_is_the_third_argument_and_the_ids_are_keyword_only(model, src):
    """greedy_decode(model, src, 10) is a length, not a start token; the ids cannot be given by place."""
    assert greedy_decode(model, src, 4).shape[1] == 4
    assert torch.equal(greedy_decode(model, src, 6), greedy_decode(model, src, max_len=6))
    assert torch.equal(beam_search(model, src, 3, 6), beam_search(model, src, beam_size=3, max_len=6))
    with pytest.raises(TypeError, match="positional argument"):
        greedy_decode(model, src, 6, 1)
    with pytest.raises(TypeError, match="positional argument"):
        beam_search(model, src, 3, 6, 0.6)


@pytest.mark.parametrize("ids, message", [
    # the last id is scored, never embedded: 99 used to reach gather as an IndexError
    (torch.tensor([[5, 99]] * 3), r"^ids: token id 99 is out of range for vocab_size=27$"),
    (torch.tensor([[-1]] * 3), r"^ids: token id -1 is out of range"),
    (torch.tensor([5, 6, 2]), r"^ids: expected token ids of shape \(B, T\), but got torch.int64 of shape \(3,\)$"),
    (torch.zeros(3, 0, dtype=torch.long), r"^ids: expected at least one token \(EOS included\), but got shape \(3, 0\)$"),
    (torch.full((3, 65), 4), r"^ids: 65 tokens exceed the model's max_len=64$"),   # used to name tgt_in
    (torch.tensor([[5, 2]] * 2), r"^src and ids must have the same batch size, but got \(3, 9\) and \(2, 2\)$"),
])
def test_log_prob_names_ids_when_they_are_bad(model, src, ids, message):
    with pytest.raises(ValueError, match=message):
        log_prob(model, src, ids)


def test_attention_maps_names_its_arguments_when_the_batches_differ(model, src):
    # used to name the decoder's internal x and memory
    with pytest.raises(ValueError, match=r"^src and tgt_in must have the same batch size, "
                                         r"but got \(3, 9\) and \(2, 2\)$"):
        attention_maps(model, src, torch.tensor([[1, 4]] * 2))


def test_the_last_beam_trace_entry_keeps_done_as_its_docstring_says(model, src):
    trace = []
    beam_search(model, src, beam_size=2, max_len=3, trace=trace)
    assert list(trace[-1]) == ["tokens", "logp", "done", "length", "score"]
    assert trace[-1]["done"] == trace[-2]["done"] and all(all(row) for row in trace[-1]["done"])


def test_a_finished_hypothesis_leaves_the_beam_once_k_continuations_beat_it():
    """beam_search keeps no separate store of finished hypotheses (its
    docstring and chapter 10.4 say so): a sharp untrained model shows one
    finished at step t that is gone at step t + 1, below all k survivors."""
    evicted = []
    for seed in range(10):
        torch.manual_seed(seed)
        net = Transformer(TransformerConfig(30, 30, d_model=16, n_heads=2,
                                            n_layers=1, d_ff=32, dropout=0.0))
        with torch.no_grad():
            net.out.weight.mul_(6)           # peaked distributions
        src = torch.randint(4, 30, (1, 6))
        for eos in range(4, 30):
            trace = []
            beam_search(net, src, beam_size=3, eos_id=eos, trace=trace,
                        max_len=8)
            for now, nxt in zip(trace[:-2], trace[1:-1]):
                for k in range(3):
                    hyp = now["tokens"][0][k]
                    if now["done"][0][k] and hyp not in [
                            b[:len(hyp)] for b in nxt["tokens"][0]]:
                        evicted.append((now["logp"][0][k], nxt["logp"][0]))
        if evicted:
            break
    assert evicted, "no finished hypothesis ever left the beam"
    for logp, survivors in evicted:
        assert logp < min(survivors), (logp, survivors)


def test_beam_search_encodes_each_sentence_once(model, src, monkeypatch):
    """The k beams of a sentence share its memory: encoding B·k copies would be the recomputation
    that chapter 10's cache section teaches to avoid."""
    seen, encode = [], type(model).encode

    def spy(self, s):
        seen.append(tuple(s.shape))
        return encode(self, s)
    monkeypatch.setattr(type(model), "encode", spy)
    beam_search(model, src, beam_size=4, max_len=6)
    assert seen == [tuple(src.shape)]


def test_a_trace_that_is_not_a_list_is_refused_before_the_search(model, src, monkeypatch):
    import tf_tutorial.decode as decode
    steps = []
    monkeypatch.setattr(decode, "decode_step", lambda *a: steps.append(1))
    for bad in ({}, "x"):
        with pytest.raises(TypeError, match=f"^trace must be a list, but got {type(bad).__name__} \\(or None\\)$"):
            beam_search(model, src, 2, 3, trace=bad)
    assert not steps                                      # no step ran
