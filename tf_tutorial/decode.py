"""第 10 章：解码——贪心搜索与束搜索（beam search），都带 KV 缓存。

At step t the decoder needs the keys and values of every earlier target
position. Without a cache they are recomputed from scratch each step (O(t) work
per step, O(T²) in all); with the cache
(:class:`~tf_tutorial.decoder.DecoderCache`, held by the layers themselves) each
layer appends one new key/value row per step, and the cross-attention keys and
values, which depend only on the source, are computed once.

Shape legend: B batch, k beam size, S source length, T target length,
L generated (or given) output length, t tokens so far, D d_model, H heads,
d_k head width, V target vocabulary size.
"""
from __future__ import annotations

import functools

import torch

from tf_tutorial._checks import (_is_integer, bad_value, require_fits,
                                 require_flags, require_ids,
                                 require_instance, require_nonnegative,
                                 require_sizes, require_tensors,
                                 require_token_id)
from tf_tutorial.decoder import DecoderCache
from tf_tutorial.model import Transformer, require_pair


def decode_step(model: Transformer, tokens: torch.Tensor, memory: torch.Tensor,
                src_mask: torch.Tensor, cache: DecoderCache) -> torch.Tensor:
    """解码一步：只把最新的词元送进解码器，之前的位置由缓存提供。

    Feed only the newest tokens (B,) through the decoder; the cache holds the
    rest.

    Returns the next-token logits (B, V). The cache grows by one position per
    call.
    """
    return model.decode(tokens[:, None], memory, src_mask,
                        cache=cache)[:, -1]                         # (B, V)


def _never_emit(logits: torch.Tensor, *ids: int) -> torch.Tensor:
    """PAD and BOS are never outputs: a PAD inside a prefix would be masked out
    as a key."""
    for i in ids:  # one int at a time: a list index is copied to the device
        logits[..., i] = float("-inf")
    return logits


def _require_k(x, k) -> None:
    """x a tensor (..., n) and 1 <= k <= n, or an error naming k."""
    require_tensors(x=x)
    if x.dim() == 0:
        raise ValueError("x: expected shape (..., n), rows to pick from, "
                         "but got a 0-d tensor")
    n = x.shape[-1]
    if not _is_integer(k) or not 1 <= k <= n:
        raise bad_value(_is_integer(k), f"k must be an integer from 1 to "
                        f"x's last dimension {n}, but got {k!r} "
                        f"(x has shape {tuple(x.shape)})")


def top_k_mask(x: torch.Tensor, k: int) -> torch.Tensor:
    """每行最大的 k 个值的位置；值相同时编号小的优先，和 ``argmax`` 一样。

    True at the ``k`` largest values of each row (last dim) of ``x``, exactly
    ``k`` of them; of equal values the lower indices, as ``argmax`` takes.
    ``x.topk(k)`` alone leaves that choice unspecified, so a beam of one
    could leave greedy's path where two scores tie, and ``top_k=1`` keep
    another token than greedy takes (chapter 11). No sort, no device sync.
    """
    _require_k(x, k)
    kth = x.topk(k, dim=-1).values[..., -1:]           # k-th largest (..., 1)
    at = x == kth
    room = k - (x > kth).sum(-1, keepdim=True)         # places left for ties
    return (x > kth) | (at & (at.cumsum(-1) <= room))


def _in_eval_mode(fn):
    """Run ``fn(model, ...)`` in eval mode (no dropout), then restore the
    caller's mode."""
    @functools.wraps(fn)
    def run(model, *args, **kwargs):
        # duck-typed: a torch.compile'd Transformer passes its attributes on
        if not all(hasattr(model, a) for a in ("config", "encode", "decode")):
            raise TypeError(f"model: expected a tf_tutorial.model.Transformer "
                            f"(with config, encode and decode), but got "
                            f"{type(model).__name__}")
        was_training = model.training
        model.eval()
        try:
            return fn(model, *args, **kwargs)
        finally:
            model.train(was_training)
    return run


def _require_model_device(model: Transformer, **tensors) -> None:
    """Each tensor must be on the model's device: a source built on the CPU
    for a model on a GPU is refused by name, with the fix."""
    dev = model.out.weight.device
    for name, t in tensors.items():
        if isinstance(t, torch.Tensor) and t.device != dev:
            raise ValueError(f"{name} is on {t.device}, but the model is on "
                             f"{dev}: move it first ({name}.to({str(dev)!r}))")


def _max_len(model: Transformer, src: torch.Tensor,
             max_len) -> tuple[int, torch.Tensor]:
    """The number of steps to run, and each sentence's own limit (B,).

    ``max_len``: an int for every sentence, one int per sentence (a list or a
    (B,) tensor), or None: each sentence's length without padding, plus 20.
    A sentence's limit is its own, so its output does not depend on the
    other sentences in the batch.
    """
    require_ids(src, "src", lead="B, S")
    _require_model_device(model, src=src)
    # n tokens feed the decoder BOS and the first n - 1: positions 0 .. n - 1
    limit, B = model.config.max_len, src.shape[0]
    if max_len is None:
        real = (src != model.config.pad_id).sum(1)
        caps = (real + 20).clamp(max=limit)
    else:
        if (isinstance(max_len, torch.Tensor) and max_len.dim() == 0
                and not max_len.is_floating_point() and max_len.dtype != torch.bool):
            max_len = int(max_len)       # a 0-d integer tensor is one int
        per_sentence = isinstance(max_len, (list, tuple, torch.Tensor))
        if per_sentence:
            caps = torch.as_tensor(max_len, device=src.device)
            ints = caps.dtype in (torch.int32, torch.int64)
            if caps.shape != (B,) or not ints:
                got = (f"shape {tuple(caps.shape)}, dtype {caps.dtype}"
                       if isinstance(max_len, torch.Tensor) else max_len)
                raise bad_value(ints,
                    f"max_len: expected an int or {B} ints (one per "
                    f"sentence), but got {got}")
        else:
            require_sizes(max_len=max_len)
            caps = torch.full((B,), int(max_len), device=src.device)
        if B and not 1 <= caps.min() <= caps.max() <= limit:
            raise ValueError(f"max_len must be in [1, {limit}] (the model's "
                             f"max_len), but got "
                             f"{caps.tolist() if per_sentence else max_len}")
    return (int(caps.max()) if B else 0), caps


def _ids(model: Transformer, bos_id, eos_id) -> tuple[int, int]:
    c = model.config
    ids = {"bos_id": c.bos_id if bos_id is None else bos_id,
           "eos_id": c.eos_id if eos_id is None else eos_id}
    require_token_id(**ids)
    for name, i in ids.items():
        if not 0 <= i < c.tgt_vocab_size and (name, i) != ("eos_id", -1):
            raise ValueError(f"{name}={i} is out of range for the target "
                             f"vocabulary of {c.tgt_vocab_size} tokens")
    if ids["eos_id"] == c.pad_id:
        raise ValueError(f"eos_id={c.pad_id} is the pad_id: decoding "
                         "could never tell an end from padding")
    if ids["bos_id"] == c.pad_id:   # masked as padding without the cache only
        raise ValueError(f"bos_id={c.pad_id} is the pad_id: the decoder "
                         "would mask its first position as padding")
    if ids["bos_id"] == ids["eos_id"]:
        raise ValueError(f"bos_id={ids['bos_id']} and eos_id="
                         f"{ids['eos_id']} must be different ids")
    return ids["bos_id"], ids["eos_id"]


@torch.no_grad()
@_in_eval_mode
def greedy_decode(model: Transformer, src: torch.Tensor,
                  max_len: int | None = None, *,
                  bos_id: int | None = None, eos_id: int | None = None,
                  use_cache: bool = True) -> torch.Tensor:
    """贪心解码：每一步取概率最大的词元，直到每个句子都生成了 EOS。

    Pick the most likely token at each step until every sentence has
    produced EOS.

    Args:
        src: (B, S) source ids, padded with the model's ``pad_id``.
        max_len: most tokens to generate: one int for every sentence, or one
            per sentence (a list or a (B,) tensor); default each sentence's
            length without padding plus 20. At most the model's max_len: the
            decoder then reads BOS and the first max_len - 1 tokens written.
            A sentence's output does not depend on the others in its batch.
        bos_id, eos_id: keyword only; default to the model's config (which
            takes them from the vocabulary); ``eos_id=-1`` never stops early
            (timing runs that write all ``max_len`` tokens).
        use_cache: False recomputes the whole prefix each step (slow; for
            comparison).
    Returns:
        (B, L) generated ids without BOS, EOS included, ``pad_id`` after it;
        L ≤ max_len.
    The model decodes in eval mode and is left in the mode it was in.
    """
    require_flags(use_cache=use_cache)
    bos_id, eos_id = _ids(model, bos_id, eos_id)
    (n, caps), pad = _max_len(model, src, max_len), model.config.pad_id
    memory, src_mask = model.encode(src)
    cache = model.new_cache() if use_cache else None
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long,
                    device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for t in range(1, n + 1):
        logits = (decode_step(model, ys[:, -1], memory, src_mask, cache)
                  if use_cache
                  else model.decode(ys, memory, src_mask)[:, -1])   # (B, V)
        nxt = _never_emit(logits, pad, bos_id).argmax(-1).masked_fill(done, pad)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        done |= (nxt == eos_id) | (caps <= t)      # ended, or at its limit
        if done.all():
            break
    return ys[:, 1:]


def length_penalty(length: torch.Tensor, alpha: float) -> torch.Tensor:
    """束搜索的长度惩罚 lp(Y)。

    GNMT's lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016), used by the paper with
    α = 0.6.
    """
    require_tensors(length=length)
    require_nonnegative(alpha=alpha)
    return ((5.0 + length.float()) / 6.0) ** alpha


@torch.no_grad()
@_in_eval_mode
def beam_search(model: Transformer, src: torch.Tensor,
                beam_size: int = 4, max_len: int | None = None, *,
                alpha: float = 0.6,
                bos_id: int | None = None, eos_id: int | None = None,
                use_cache: bool = True,
                trace: list | None = None) -> torch.Tensor:
    """束搜索：每步保留 k 个最可能的前缀，最后按长度归一化的得分选出最好的一个。

    Keep the ``beam_size`` most likely prefixes; at the end pick the best by
    log p / lp(Y).

    Each step every beam proposes its V continuations, scored by the prefix's
    log p plus the new token's; the k best of the k·V survive, and the cache
    follows them (``reorder``). A finished hypothesis keeps its score frozen
    (it can only add <pad>, at no cost) and competes with the unfinished ones:
    once k continuations score higher it leaves the beam for good (there is
    no separate store of finished hypotheses). A beam wider than the first
    steps can fill (k > V − 2 at step 1) carries -inf beams until there are
    enough prefixes; only memory limits k (B·k rows).
    ``trace``: a list that receives each step's beams, sentence by sentence,
    as nested Python lists: ``tokens`` (B, k, t) ids, ``logp`` (B, k),
    ``done`` (B, k); then a last entry that adds ``length`` and the
    length-normalised ``score`` (B, k), from which the winner is picked.
    ``max_len`` as in :func:`greedy_decode`: a sentence at its own limit
    stops, its beams frozen like finished ones. The arguments after it are
    keyword only.
    Returns (B, L) like :func:`greedy_decode`, L the length of the longest
    chosen hypothesis (eval mode, the model's mode restored).
    """
    require_sizes(beam_size=beam_size)
    require_nonnegative(alpha=alpha)
    require_flags(use_cache=use_cache)
    if trace is not None:
        require_instance(trace, list, "trace", " (or None)")
    bos_id, eos_id = _ids(model, bos_id, eos_id)
    (n, caps), pad, k = _max_len(model, src, max_len), model.config.pad_id, \
        beam_size
    B, dev = src.shape[0], src.device
    memory, src_mask = model.encode(src)       # once per sentence, then
    memory = memory.repeat_interleave(k, dim=0)             # (B·k, S, D)
    src_mask = src_mask.repeat_interleave(k, dim=0)         # (B·k, 1, S)
    cache = model.new_cache() if use_cache else None
    ys = torch.full((B * k, 1), bos_id, dtype=torch.long, device=dev)
    scores = torch.full((B, k), float("-inf"), device=dev)
    scores[:, 0] = 0.0           # all beams start equal: expand one only
    done = torch.zeros(B * k, dtype=torch.bool, device=dev)
    lengths = torch.zeros(B * k, dtype=torch.long, device=dev)
    caps = caps.repeat_interleave(k)                        # (B·k,)
    for t in range(1, n + 1):
        logits = (decode_step(model, ys[:, -1], memory, src_mask, cache)
                  if use_cache
                  else model.decode(ys, memory, src_mask)[:, -1])
        logp = torch.log_softmax(_never_emit(logits.float(), pad, bos_id),
                                 dim=-1)                    # (B·k, V)
        V = logp.shape[-1]
        logp[done] = float("-inf")
        logp[done, pad] = 0.0    # a finished beam carries on unchanged
        cand = (scores.view(B * k, 1) + logp).view(B, k * V)
        # the k best; of equal scores the first, as argmax (greedy) takes
        scores, idx = cand.masked_fill(~top_k_mask(cand, k),
                                       float("-inf")).topk(k, dim=-1)
        # each survivor's parent, as a row of ys: (B·k,)
        beam = (idx // V + torch.arange(B, device=dev)[:, None] * k).view(-1)
        tok = (idx % V).view(-1)
        ys = torch.cat([ys[beam], tok[:, None]], dim=1)
        # memory and src_mask need no reordering: a beam never leaves its
        # sentence, whose k rows are equal
        if cache is not None:
            cache.reorder(beam)  # each surviving beam takes its parent's cache
        lengths = lengths[beam] + (~done[beam]).long()
        done = done[beam] | (tok == eos_id) | (caps <= t)  # or at the limit
        if trace is not None:
            trace.append({"tokens": ys[:, 1:].view(B, k, -1).tolist(),
                          "logp": scores.tolist(),
                          "done": done.view(B, k).tolist()})
        if done.all():
            break
    final = scores.view(-1) / length_penalty(lengths, alpha)
    if trace is not None:
        trace.append({"tokens": ys[:, 1:].view(B, k, -1).tolist(),
                      "logp": scores.tolist(),
                      "done": done.view(B, k).tolist(),
                      "length": lengths.view(B, k).tolist(),
                      "score": final.view(B, k).tolist()})
    best = final.view(B, k).argmax(-1) + torch.arange(B, device=dev) * k
    # as wide as the longest winner (other beams may have run on further);
    # an empty batch gives (0, 0), as greedy_decode does
    width = int(lengths[best].max()) if B else 0
    return ys[best, 1:1 + width]


@torch.no_grad()
@_in_eval_mode
def log_prob(model: Transformer, src: torch.Tensor,
             ids: torch.Tensor) -> torch.Tensor:
    """模型给一个给定输出序列的对数概率 log p(Y | X)。

    log p(Y | X) that the model gives to outputs ``ids`` (B, L) (EOS included,
    <pad> after): (B,).

    Scored as decoding scores them (<pad> and <bos> can never be emitted), so
    the log p that beam search keeps for its winner equals this; comparing it
    for the reference and for a wrong output tells a search error from a model
    error.
    """
    require_pair(src, ids, "ids")
    _require_model_device(model, src=src, ids=ids)
    c = model.config
    if ids.shape[1] == 0:
        raise ValueError("ids: expected at least one token (EOS included), "
                         f"but got shape {tuple(ids.shape)}")
    require_fits("ids", 0, ids.shape[1], c.max_len)
    try:                 # every id, the last too: it is scored, never embedded
        model.tgt_embed.check_ids(ids)
    except ValueError as error:
        raise ValueError(f"ids: {error}") from None
    tgt_in = torch.cat([torch.full_like(ids[:, :1], c.bos_id), ids[:, :-1]],
                       dim=1)                             # (B, L)
    logits = _never_emit(model(src, tgt_in).float(),
                         c.pad_id, c.bos_id)              # (B, L, V)
    logp = logits.log_softmax(-1).gather(-1, ids[..., None])[..., 0]  # (B, L)
    return logp.masked_fill(ids == c.pad_id, 0.0).sum(-1)


def strip(ids: torch.Tensor, eos_id: int) -> list[list[int]]:
    """把生成的编号按句子拆开，并截掉 EOS 及其后的部分。

    (B, L) generated ids → one list per sentence, cut before EOS.
    """
    require_tensors(ids=ids)
    require_token_id(eos_id=eos_id)   # "2" would cut nothing, True at id 1
    out = []
    for row in ids.tolist():
        out.append(row[:row.index(eos_id)] if eos_id in row else row)
    return out


def translate(model: Transformer, sentences, src_vocab, tgt_vocab,
              beam_size: int = 1, warn: bool = True) -> list[str]:
    """用内存里的模型把英文句子译成中文（词元之间以空格分隔）。

    English strings → Chinese strings (tokens joined by spaces), for a model
    in memory.

    Input is normalised as the corpus is
    (:func:`~tf_tutorial.corpus.data.normalise`). Words the model never saw
    become UNK; with ``warn=True`` that is reported, naming them.
    """
    # (translate.py builds on this module)
    from tf_tutorial.translate import Translator

    sentences = [sentences] if isinstance(sentences, str) else list(sentences)
    return Translator(model, src_vocab, tgt_vocab, beam_size)(
        sentences, tokens=True, warn=warn)


def load_translator(path, beam_size: int = 1, device: str = "auto"):
    """从训练检查点载入一个可以直接调用的翻译器。

    A callable translator from a training checkpoint:
    ``load_translator(p)("I love China.")``.

    See :func:`tf_tutorial.translate.load_translator`.
    """
    from tf_tutorial.translate import load_translator as load

    return load(path, beam_size, device)


@torch.no_grad()
@_in_eval_mode
def attention_maps(model: Transformer, src: torch.Tensor,
                   tgt_in: torch.Tensor) -> dict:
    """教师强制地跑一遍解码器，留下每一层的注意力权重，用来画图。

    Teacher-forced pass that keeps every decoder layer's attention weights,
    for pictures.

    Returns {"self": [(B, H, T, T)] * N, "cross": [(B, H, T, S)] * N}.
    """
    require_pair(src, tgt_in)
    _require_model_device(model, src=src, tgt_in=tgt_in)
    memory, src_mask = model.encode(src)
    _, maps = model.decode(tgt_in, memory, src_mask, return_weights=True)
    return maps
