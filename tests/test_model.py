"""The assembled Transformer: configuration checks, masks, weight sharing, equal to nn.Transformer."""
import pytest
import torch
from torch import nn

from tf_tutorial.interop import from_torch
from tf_tutorial.model import Transformer, TransformerConfig, count_parameters

SMALL = dict(src_vocab_size=29, tgt_vocab_size=23, d_model=12, n_heads=3, n_layers=2, d_ff=20, dropout=0.0)


@pytest.mark.parametrize("kw, message", [
    (dict(d_model=10, n_heads=3), "d_model=10 is not divisible by n_heads=3"),
    (dict(dropout=1.0), r"dropout must be in \[0, 1\), but got 1.0"),
    (dict(n_layers=0), "n_layers must be a positive integer, but got 0"),
    (dict(pad_id=40), "pad_id=40 is not a valid id"),
    (dict(share_embeddings=True), "share_embeddings=True needs one shared vocabulary"),
    (dict(bos_id=3, eos_id=3), "bos_id=3 and eos_id=3 must be different ids"),
    (dict(dropout="0.1"), r"dropout must be in \[0, 1\), but got '0.1'"),
])
def test_config_validation(kw, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(**{**SMALL, **kw})


def test_numpy_integers_are_accepted_and_stored_as_ints():
    """np.int64 sizes were accepted but ids were refused as 'not a valid id' (they are valid)."""
    import numpy as np

    cfg = TransformerConfig(**{**SMALL, "d_model": np.int64(12), "pad_id": np.int64(0),
                               "bos_id": np.int32(3), "eos_id": np.int16(4)})
    assert (cfg.d_model, cfg.pad_id, cfg.bos_id, cfg.eos_id) == (12, 0, 3, 4)
    assert all(type(getattr(cfg, n)) is int for n in ("d_model", "pad_id", "bos_id", "eos_id"))
    assert cfg == TransformerConfig(**{**SMALL, "bos_id": 3, "eos_id": 4})
    with pytest.raises(ValueError, match="pad_id=True is not a valid id"):
        TransformerConfig(**SMALL, pad_id=True)


def test_a_default_id_too_large_for_a_tiny_vocabulary_says_it_is_the_default():
    with pytest.raises(ValueError, match="eos_id=2 is the default: pass eos_id"):
        TransformerConfig(**{**SMALL, "tgt_vocab_size": 2})
    with pytest.raises(ValueError, match=r"eos_id=7 must be an id of the target vocabulary \(size 5\)"
                                         r" other than pad_id=0$"):
        TransformerConfig(**{**SMALL, "tgt_vocab_size": 5}, eos_id=7)


def test_moving_pad_id_on_a_built_config_says_to_pass_the_filled_in_ids():
    import dataclasses
    cfg = TransformerConfig(**SMALL)                     # bos 1, eos 2 filled in
    with pytest.raises(ValueError, match=r"^bos_id=1 must be an id .* other than pad_id=1 \(if pad_id "
                                         r"was changed on a built config, e\.g\. with dataclasses\.replace, "
                                         r"the bos_id and eos_id it filled in were not: pass them too\)$"):
        dataclasses.replace(cfg, pad_id=1)
    # passing the ids a config built with pad_id=1 would fill in gives that config
    assert dataclasses.replace(cfg, pad_id=1, bos_id=0, eos_id=2) == TransformerConfig(**SMALL, pad_id=1)
    with pytest.raises(ValueError, match=r"other than pad_id=0$"):   # an id out of range: no hint
        TransformerConfig(**SMALL, bos_id=-1)


def test_base_parameter_count_matches_torch_nn_transformer():
    """Base model, shared 37k vocabulary: nn.Transformer's count, minus its two final norms
    (absent in Post-LN), plus one shared embedding table."""
    ours = count_parameters(Transformer(TransformerConfig(37000, 37000, share_embeddings=True)))
    ref = nn.Transformer(512, 8, 6, 6, 2048, batch_first=True)
    expected = sum(p.numel() for p in ref.parameters()) - 2 * 2 * 512 + 37000 * 512
    assert ours == expected
    assert 62e6 < ours < 64e6


def test_weight_sharing():
    m = Transformer(TransformerConfig(**{**SMALL, "tgt_vocab_size": 29}, share_embeddings=True))
    assert m.src_embed.table.weight is m.tgt_embed.table.weight is m.out.weight
    untied = Transformer(TransformerConfig(**SMALL, tie_output=False))
    assert untied.out.weight is not untied.tgt_embed.table.weight
    assert count_parameters(untied) == count_parameters(Transformer(TransformerConfig(**SMALL))) + 23 * 12


def test_count_parameters_counts_trainable_ones_and_refuses_a_non_module():
    layer = nn.Linear(3, 2)
    assert count_parameters(layer) == 8
    layer.bias.requires_grad_(False)
    assert count_parameters(layer) == 6
    with pytest.raises(TypeError, match="^model must be a Module, but got int$"):
        count_parameters(5)


def _model(**kw):
    torch.manual_seed(0)
    return Transformer(TransformerConfig(**{**SMALL, **kw})).double().eval()


def test_causal_and_padding_invariance():
    m = _model()
    src = torch.randint(4, 29, (2, 7))
    tgt = torch.randint(4, 23, (2, 5))
    out = m(src, tgt)
    assert out.shape == (2, 5, 23)
    changed = tgt.clone()
    changed[:, 3] = 7
    assert torch.allclose(m(src, changed)[:, :3], out[:, :3], atol=1e-12)       # no peeking
    padded = torch.cat([src, torch.zeros(2, 4, dtype=torch.long)], 1)           # pad_id = 0
    assert torch.allclose(m(padded, tgt), out, atol=1e-10)
    tgt_padded = torch.cat([tgt, torch.zeros(2, 3, dtype=torch.long)], 1)
    assert torch.allclose(m(src, tgt_padded)[:, :5], out, atol=1e-10)


@pytest.mark.parametrize("norm_first", [False, True])
def test_equal_to_torch_transformer_with_copied_weights(norm_first):
    torch.manual_seed(1)
    D, H, F, N = 12, 3, 20, 2
    enc_layer = nn.TransformerEncoderLayer(D, H, F, 0.0, batch_first=True, norm_first=norm_first)
    dec_layer = nn.TransformerDecoderLayer(D, H, F, 0.0, batch_first=True, norm_first=norm_first)
    norm = (lambda: nn.LayerNorm(D)) if norm_first else (lambda: None)
    ref = nn.Transformer(D, H, custom_encoder=nn.TransformerEncoder(enc_layer, N, norm(), enable_nested_tensor=False),
                         custom_decoder=nn.TransformerDecoder(dec_layer, N, norm()), batch_first=True).double().eval()
    m = _model(norm_first=norm_first)
    m.encoder.load_state_dict(from_torch(ref.encoder).state_dict())
    m.decoder.load_state_dict(from_torch(ref.decoder).state_dict())
    src = torch.randint(4, 29, (3, 7))
    src[1, 4:] = 0
    tgt = torch.randint(4, 23, (3, 5))
    tgt[2, 3:] = 0
    tgt[0, 1] = 0      # a <pad> inside a row: only the padding mask hides it from later queries
    with torch.no_grad():
        y = ref(m.positions(m.src_embed(src)), m.positions(m.tgt_embed(tgt)),
                tgt_mask=torch.ones(5, 5, dtype=torch.bool).triu(1),
                src_key_padding_mask=src == 0, tgt_key_padding_mask=tgt == 0, memory_key_padding_mask=src == 0)
        expected = m.out(y)
        got = m(src, tgt)
    keep = tgt != 0                       # torch gives NaN-free but arbitrary rows for pad queries
    assert torch.allclose(got[keep], expected[keep], atol=1e-10)


def test_bad_token_shapes():
    m = _model()
    with pytest.raises(ValueError, match=r"src: expected token ids of shape \(B, S\), but got torch.int64 of shape \(7,\)"):
        m(torch.ones(7, dtype=torch.long), torch.ones(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"^src and tgt_in must have the same batch size, but got \(2, 4\) and \(3, 3\)$"):
        m(torch.ones(2, 4, dtype=torch.long), torch.ones(3, 3, dtype=torch.long))


@pytest.mark.parametrize("src_len, tgt_len, message", [
    (9, 3, "src: 9 tokens exceed the model's max_len=8"),
    (3, 9, "tgt_in: 9 tokens exceed the model's max_len=8"),
])
def test_a_sequence_longer_than_max_len_is_named(src_len, tgt_len, message):
    """Not the position table's message: the argument that is too long."""
    m = Transformer(TransformerConfig(**SMALL, max_len=8))
    src = torch.ones(1, src_len, dtype=torch.long)
    tgt = torch.ones(1, tgt_len, dtype=torch.long)
    with pytest.raises(ValueError, match=message):
        m(src, tgt)
    assert m(src[:, :8], tgt[:, :8]).shape == (1, min(tgt_len, 8), 23)


def test_an_empty_sequence_and_an_id_out_of_range_name_their_argument():
    """An empty source is refused like an empty target (a source of <pad> only is a sentence whose
    rows get zeros); in every entry that encodes."""
    from tf_tutorial.decode import beam_search, greedy_decode

    m = Transformer(TransformerConfig(**{**SMALL, "src_vocab_size": 13, "tgt_vocab_size": 11}))
    with pytest.raises(ValueError, match=r"^tgt_in: expected at least one token \(BOS\), but got shape \(2, 0\)$"):
        m(torch.ones(2, 3, dtype=torch.long), torch.ones(2, 0, dtype=torch.long))
    empty = torch.ones(2, 0, dtype=torch.long)
    for call in (lambda: m(empty, torch.ones(2, 2, dtype=torch.long)), lambda: m.encode(empty),
                 lambda: greedy_decode(m, empty, 3), lambda: beam_search(m, empty, 2, 3)):
        with pytest.raises(ValueError, match=r"^src: expected at least one token \(EOS\), but got shape \(2, 0\)$"):
            call()
    pads = torch.full((1, 3), m.config.pad_id)
    assert m(pads, torch.ones(1, 2, dtype=torch.long)).isfinite().all()
    with pytest.raises(ValueError, match="^tgt_in: token id 12 is out of range for vocab_size=11$"):
        m(torch.tensor([[3, 12]]), torch.tensor([[1, 12]]))          # 12 is a fine source id
    with pytest.raises(ValueError, match="^src: token id 13 is out of range for vocab_size=13$"):
        m(torch.tensor([[3, 13]]), torch.tensor([[1, 2]]))


@pytest.mark.parametrize("pad_id, bos_id, eos_id", [(0, 1, 2), (1, 0, 2), (2, 1, 0), (3, 1, 2)])
def test_special_ids_left_unset_avoid_the_padding_id(pad_id, bos_id, eos_id):
    c = TransformerConfig(10, 10, pad_id=pad_id)
    assert (c.pad_id, c.bos_id, c.eos_id) == (pad_id, bos_id, eos_id)
    assert c.to_dict()["bos_id"] == bos_id          # checkpoints hold the ids
    assert TransformerConfig(**c.to_dict()) == c
    # set explicitly, they are kept
    assert TransformerConfig(10, 10, pad_id=pad_id, bos_id=5, eos_id=6).eos_id == 6


def test_gpt_eos_left_unset_avoids_the_padding_id():
    from tf_tutorial.gpt import GPTConfig
    assert GPTConfig(10).eos_id == 2
    assert GPTConfig(10, pad_id=2).eos_id == 0
    assert GPTConfig(10, pad_id=2, eos_id=7).eos_id == 7


@pytest.mark.parametrize("name", ["bos_id", "eos_id"])
def test_special_ids_may_not_be_the_padding_id(name):
    with pytest.raises(ValueError, match=f"{name}=0 must be an id of the target vocabulary"):
        TransformerConfig(10, 10, pad_id=0, **{name: 0})
    with pytest.raises(ValueError, match=f"{name}=10 must be an id"):
        TransformerConfig(10, 10, **{name: 10})


def test_a_compiled_model_keeps_the_lengths_symbolic():
    """Batches of new lengths reuse the compiled graph: causal_mask must not turn the target length
    into a constant, or every length compiles a graph of its own (minutes of inductor on a GPU)."""
    import torch._dynamo
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    model = Transformer(TransformerConfig(**{**SMALL, "n_layers": 1})).eval()
    compiled = torch.compile(model, backend="eager")
    g = torch.Generator().manual_seed(0)
    for T in (5, 7, 9):
        src, tgt = torch.randint(3, 29, (2, 6 + T % 3), generator=g), torch.randint(3, 23, (2, T), generator=g)
        torch.testing.assert_close(compiled(src, tgt), model(src, tgt))
    # the first shapes, then one graph with symbolic lengths (dynamo's automatic dynamic shapes)
    assert counters["stats"]["unique_graphs"] == 2
    torch._dynamo.reset()


def test_a_config_may_be_changed_before_the_model_and_the_model_keeps_its_own():
    """The configs are plain dataclasses (a reader writes cfg.dropout = 0.0); the models check the
    config again when they are built and keep a copy, so a later change cannot desynchronise them."""
    import dataclasses

    from tf_tutorial.gpt import GPT, GPTConfig
    for make, build, kw in ((TransformerConfig, Transformer, dict(src_vocab_size=20, tgt_vocab_size=21)),
                            (GPTConfig, GPT, dict(vocab_size=20))):
        cfg = make(**kw, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=30)
        cfg.dropout = 0.0
        model = build(cfg)
        assert model.config == cfg and model.config is not cfg and model.config.dropout == 0.0
        cfg.d_model = 64                                   # afterwards: the model is not touched
        assert model.config.d_model == 16
        cfg.d_model, cfg.n_heads = 10, 3
        with pytest.raises(ValueError, match="^d_model=10 is not divisible by n_heads=3$"):
            build(cfg)                                     # a bad change is caught when building
        assert dataclasses.replace(model.config) == model.config
