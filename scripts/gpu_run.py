"""Chapter 10's GPU run: train the ``gpu`` configuration once and record what the chapter reports.

    python -m scripts.gpu_run OUT_DIR [--seconds 290]

Writes OUT_DIR/ch10_gpu.json: the machine, the training curves, test and generalisation
scores (greedy and beam), KV-cache decoding speed, a few translations; and checks on the way
that the fp16 + loss-scaler path (what a T4 uses) trains without overflow. Needs a CUDA GPU.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
import time
from pathlib import Path

import torch

from tf_tutorial.decode import greedy_decode, translate
from tf_tutorial.metrics import evaluate
from tf_tutorial.model import count_parameters
from tf_tutorial.train import CONFIGS, autocast_dtype, train

SENTENCES = ["I love China .", "the dog bites the man .", "the man bites the dog .",
             "I borrowed a book about quantum physics at the library yesterday .",
             "the library bought three hundred and five thousand books last year ."]


def decode_speed(model, corpus, device, tokens: int = 64, batch: int = 32) -> dict:
    src = torch.randint(4, len(corpus.src_vocab), (batch, 20), device=device)
    out = {}
    for cached in (True, False):
        greedy_decode(model, src, eos_id=-1, max_len=8, use_cache=cached)          # warm up
        torch.cuda.synchronize()
        t = time.perf_counter()
        greedy_decode(model, src, eos_id=-1, max_len=tokens, use_cache=cached)     # never stops early
        torch.cuda.synchronize()
        out["cached_s" if cached else "recompute_s"] = time.perf_counter() - t
    out["speedup"] = out["recompute_s"] / out["cached_s"]
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--seconds", type=float, default=290.0)
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("scripts.gpu_run needs a CUDA GPU")
    dev = torch.device("cuda")
    record = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "python": platform.python_version(),
              "precision": str(autocast_dtype(dev))}

    # 1. the T4 path: fp16 autocast with a gradient scaler, a few hundred steps, no inf/NaN
    small = dataclasses.replace(CONFIGS["gpu"], n_train=20_000)
    r16 = train(small, precision="fp16", max_steps=200, progress=False)
    record["fp16_check"] = {"steps": len(r16.history["loss"]), "first_loss": r16.history["loss"][0],
                            "last_loss": r16.history["loss"][-1],
                            "all_finite": all(math.isfinite(x) for x in r16.history["loss"])}
    print("fp16 check", record["fp16_check"], flush=True)

    # 2. the chapter's run
    t = time.perf_counter()
    r = train(CONFIGS["gpu"], max_seconds=args.seconds, progress=False)
    record["wall_s_including_data"] = time.perf_counter() - t
    h = r.history
    record.update(config=dataclasses.asdict(r.config), parameters=count_parameters(r.model),
                  steps=h["step"][-1], train_seconds=h["seconds"], tokens=h["tokens"],
                  tokens_per_s=h["tokens"] / h["seconds"], steps_per_s=h["step"][-1] / h["seconds"],
                  peak_memory_gb=torch.cuda.max_memory_allocated() / 2**30)
    every = max(1, len(h["loss"]) // 400)
    record["curve"] = {"step": h["step"][::every], "loss": h["loss"][::every], "lr": h["lr"][::every],
                       "eval_step": h["eval_step"], "valid_loss": h["valid_loss"], "valid_acc": h["valid_acc"]}
    c = r.corpus
    record["corpus"] = {**c.summary(), "src_vocab": len(c.src_vocab), "tgt_vocab": len(c.tgt_vocab)}
    for name, pairs, beam in (("test_greedy", c.test, 1), ("test_beam4", c.test, 4), ("general_greedy", c.general, 1)):
        t = time.perf_counter()
        ev = evaluate(r.model, pairs, c.src_vocab, c.tgt_vocab, beam_size=beam)
        record[name] = {"exact_match": ev["exact_match"], "bleu": ev["bleu"], "seconds": time.perf_counter() - t,
                        "by_phenomenon": ev["by_phenomenon"], "n": len(pairs)}
        wrong = [(" ".join(en), r_, h_) for (en, _), r_, h_ in zip(pairs, ev["refs"], ev["hyps"]) if r_ != h_]
        record[name]["errors"] = wrong[:12]
        print(name, record[name]["exact_match"], record[name]["bleu"], flush=True)
    record["translations"] = dict(zip(SENTENCES, translate(r.model, SENTENCES, c.src_vocab, c.tgt_vocab)))
    record["decode_speed"] = decode_speed(r.model, c, dev)
    from tf_tutorial.data import encode_pairs, pad
    from tf_tutorial.decode import attention_maps
    enc = encode_pairs(c.test[:4], c.src_vocab, c.tgt_vocab)
    maps = attention_maps(r.model, pad([e[0] for e in enc], 0).to(dev), pad([e[1][:-1] for e in enc], 0).to(dev))
    record["attention_maps_device"] = str(maps["cross"][0].device)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ch10_gpu.json").write_text(json.dumps(record, ensure_ascii=False, indent=1))
    print(json.dumps({k: v for k, v in record.items() if k not in ("curve",)}, ensure_ascii=False)[:3000])


if __name__ == "__main__":
    main()
