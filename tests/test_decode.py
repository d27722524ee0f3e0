"""Greedy and beam search with the KV cache: same tokens as recomputation, EOS, batching."""
import pytest
import torch

from tf_tutorial.decode import (attention_maps, beam_search, greedy_decode, length_penalty, strip,
                                translate)
from tf_tutorial.data import Vocab
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
    assert strip(torch.tensor([[5, 6, EOS, 0], [7, 8, 9, 4]])) == [[5, 6], [7, 8, 9, 4]]


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
    with pytest.raises(ValueError, match=r"max_len must be in \[1, 63\]"):
        greedy_decode(model, src, max_len=100)
    with pytest.raises(ValueError, match="beam_size must be a positive integer, but got 0"):
        beam_search(model, src, beam_size=0)


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
