"""第 10 章：给读者用的翻译——读入训练好的检查点，把自己写的英文句子译成中文。

Usage:
python -m tf_tutorial.translate runs/cpu/checkpoint.pt "I love China."
python -m tf_tutorial.translate runs/cpu/checkpoint.pt --beam 4 < sentences.txt

In a notebook:
``t = load_translator("runs/cpu/checkpoint.pt"); t("I love China.")``.
A typed sentence is first made to look like a corpus sentence
(:func:`~tf_tutorial.corpus.data.normalise`), then decoded with
:func:`~tf_tutorial.decode.greedy_decode` or
:func:`~tf_tutorial.decode.beam_search`.
Shape legend: B batch, S source length (with EOS), L generated length.
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys

import torch

from tf_tutorial._checks import (require_flags, require_instance,
                                 require_sizes)
from tf_tutorial.corpus.data import TITLE_WORDS, Vocab, normalise
from tf_tutorial.decode import beam_search, greedy_decode
from tf_tutorial.model import Transformer, TransformerConfig
from tf_tutorial.train import (CheckpointError, checkpoint_path,
                               load_checkpoint, pick_device,
                               state_dict_problem)


def _require_model_and_vocabs(model, src_vocab, tgt_vocab) -> None:
    """A Transformer and two Vocabs whose sizes are the ones it was built for.

    A vocabulary of the wrong size would translate into nonsense (or fail deep
    inside an embedding lookup); swapped vocabularies are named as such.
    """
    require_instance(model, Transformer, "model")
    require_instance(src_vocab, Vocab, "src_vocab")
    require_instance(tgt_vocab, Vocab, "tgt_vocab")
    cfg = model.config
    sizes = (len(src_vocab), len(tgt_vocab))
    if sizes == (cfg.tgt_vocab_size, cfg.src_vocab_size) != (
            cfg.src_vocab_size, cfg.tgt_vocab_size):
        raise ValueError(f"src_vocab has {sizes[0]} tokens and tgt_vocab "
                         f"{sizes[1]}, but the model was built for "
                         f"src_vocab_size={cfg.src_vocab_size} and "
                         f"tgt_vocab_size={cfg.tgt_vocab_size}: are the two "
                         "vocabularies swapped?")
    for name, n, want in (("src_vocab", sizes[0], cfg.src_vocab_size),
                          ("tgt_vocab", sizes[1], cfg.tgt_vocab_size)):
        if n != want:
            raise ValueError(f"{name} has {n} tokens, but the model was "
                             f"built for {name}_size={want}")


class Translator:
    """训练好的模型连同它的两个词表，可以直接拿英文句子来调用。

    A trained model with its vocabularies, callable on English strings
    (see :func:`load_translator`).
    """

    def __init__(self, model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab,
                 beam_size: int = 1, path: str | None = None,
                 batch_size: int = 64):
        require_sizes(beam_size=beam_size, batch_size=batch_size)
        _require_model_and_vocabs(model, src_vocab, tgt_vocab)
        self.model, self.src_vocab, self.tgt_vocab = (
            model.eval(), src_vocab, tgt_vocab)
        self.beam_size, self.path, self.batch_size = beam_size, path, batch_size
        # the source also gets an EOS
        self.max_tokens = model.config.max_len - 1
        # where unknown-word notes go, and how they start: stdout and "注意："
        # (the CLI: stderr, after the program's name, as its errors are)
        self.note_file, self.note_prefix = None, ""

    def __repr__(self) -> str:
        device = next(self.model.parameters()).device
        return (f"Translator({self.path!r}, src_vocab={len(self.src_vocab)}, "
                f"tgt_vocab={len(self.tgt_vocab)}, beam_size={self.beam_size}, "
                f"max_tokens={self.max_tokens}, device='{device}')")

    def encode(self, text: str, warn: bool = True) -> list[int]:
        """把一句英文规范化、检查长度，再换成以 EOS 结尾的源序列编号。

        Normalise, check the length, and map to source ids ending in EOS; notes
        unknown words.
        """
        require_flags(warn=warn)
        tokens = normalise(text, self.src_vocab)
        if len(tokens) > self.max_tokens:
            raise ValueError(
                f"sentence has {len(tokens)} tokens after normalisation; "
                f"this model accepts at most {self.max_tokens}")
        unknown = [t for t in tokens if t not in self.src_vocab]
        if unknown and warn:
            print(f"{self.note_prefix}注意：{unknown} 不在词表中，按 <unk> "
                  f"处理：{text!r}", file=self.note_file)
        return self.src_vocab.encode(tokens, eos=True)

    def decode(self, rows: list[list[int]]) -> list[list[str]]:
        """把源序列编号解码成中文词元；长度相同的句子放进同一批，所以无需填充。

        Source ids → Chinese tokens. Sentences of equal length share a batch:
        there is no padding, so a translation does not depend on the sentences
        sent with it."""
        out: list = [None] * len(rows)
        groups: dict[int, list[int]] = {}
        for i, row in enumerate(rows):
            groups.setdefault(len(row), []).append(i)
        device = next(self.model.parameters()).device
        for idx in groups.values():
            for k in range(0, len(idx), self.batch_size):
                chunk = idx[k:k + self.batch_size]
                src = torch.tensor([rows[i] for i in chunk],
                                   device=device)                 # (B, S)
                ids = (greedy_decode(self.model, src) if self.beam_size == 1
                       else beam_search(self.model, src,
                                        self.beam_size))          # (B, L)
                for i, row in zip(chunk, ids.cpu()):
                    out[i] = self.tgt_vocab.decode(row)
        return out

    def __call__(self, text: str | list[str], tokens: bool = False,
                 warn: bool = True) -> str | list[str]:
        """翻译一句英文（返回字符串）或一组句子（返回列表）。

        Translate one sentence (→ str) or a list of them (→ list);
        ``tokens=True`` spaces the tokens.
        """
        require_flags(tokens=tokens, warn=warn)
        single = isinstance(text, str)
        if not single and not isinstance(text, (list, tuple)):
            raise TypeError("text must be a str or a list of str, but got "
                            f"{type(text).__name__}")
        for n, s in enumerate([] if single else text):
            if not isinstance(s, str):
                raise TypeError(f"text[{n}] must be a str (one sentence), "
                                f"but got {type(s).__name__}")
        rows = []
        for n, sentence in enumerate([text] if single else list(text), 1):
            try:
                rows.append(self.encode(sentence, warn))
            except ValueError as e:
                raise ValueError(str(e) if single
                                 else f"sentence {n}: {e}") from None
        out = [(" " if tokens else "").join(t) for t in self.decode(rows)]
        return out[0] if single else out


def load_translator(path, beam_size: int = 1,
                    device: str = "auto") -> Translator:
    """从 ``python -m tf_tutorial.train`` 的检查点（或所在的文件夹）载入翻译器。

    A :class:`Translator` from a checkpoint of ``python -m tf_tutorial.train``
    (or its folder).

    Raises:
        CheckpointError: a missing, corrupt or non-training checkpoint
            (a ``ValueError``).
    """
    path = checkpoint_path(path)
    state = load_checkpoint(path)
    missing = [k for k in ("model_config", "src_itos", "tgt_itos")
               if k not in state]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {', '.join(missing)}; "
                              f"it was not written by tf_tutorial.train")
    try:
        model = Transformer(TransformerConfig(**state["model_config"]))
        model.load_state_dict(state["model"])
    except (TypeError, ValueError, RuntimeError) as e:
        raise CheckpointError(
            f"checkpoint {path} holds no usable model: "
            f"{state_dict_problem(e)}") from None
    src, tgt = (Vocab(state["src_itos"][4:]),
                Vocab(state["tgt_itos"][4:]))    # Vocab sorts: same ids
    if (src.itos != list(state["src_itos"])
            or tgt.itos != list(state["tgt_itos"])):
        raise CheckpointError(
            f"checkpoint {path} has vocabularies in an unexpected order")
    return Translator(model.to(pick_device(device)), src, tgt, beam_size,
                      path=str(path))


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit code 2, no usage dump
        # parse_intermixed_args also lists the optional sentence (nargs="*")
        message = message.replace("checkpoint, sentence", "checkpoint")
        self.exit(2, f"{self.prog}: error: {message}\n")


_ABBREVIATIONS = {t + "." for t in TITLE_WORDS}          # "Dr." ends no sentence


def sentences(arguments: list[str]) -> list[str]:
    """命令行上的参数分成句子。

    Quoted sentences (some argument holds a space) are one sentence each:
    ``"I love China." "The dog runs."``. Words typed without quotes are
    joined, and a word ending in . ? or ! (not a title such as ``Dr.``)
    ends a sentence: ``I love China. The dog runs.`` is two, and so is
    ``"Hello." "Goodbye."``.
    """
    if any(len(a.split()) > 1 for a in arguments):
        return list(arguments)
    out, words = [], []
    for word in arguments:
        words.append(word)
        if word[-1:] in ".?!" and word not in _ABBREVIATIONS:
            out.append(" ".join(words))
            words = []
    return out + [" ".join(words)] * bool(words)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m tf_tutorial.translate",
                formatter_class=argparse.RawDescriptionHelpFormatter,
                description="Translate English sentences into Chinese with a "
                            "trained checkpoint.",
                epilog='example:\n'
                       '  python -m tf_tutorial.translate '
                       'runs/cpu/checkpoint.pt "The dog bites the man."\n'
                       "  python -m tf_tutorial.translate "
                       "runs/cpu/checkpoint.pt < in.txt > out.txt")
    p.add_argument("checkpoint",
                   help="checkpoint.pt written by python -m tf_tutorial.train "
                        "(or its folder)")
    p.add_argument("sentence", nargs="*",
                   help="the sentences, translated one per line: each "
                        "quoted argument is one; words typed without quotes "
                        "are split after . ? or !; without any (or with -), "
                        "one sentence per line from stdin")
    p.add_argument("--beam", type=int, default=1,
                   help="beam size (default 1 = greedy)")
    p.add_argument("--tokens", action="store_true",
                   help="print the Chinese tokens separated by spaces")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    return p


def main(argv=None) -> int:
    """命令行入口：``python -m tf_tutorial.translate``。

    Ctrl-C ends it with status 130 and a reader that stops reading
    (``... | head -1``) with 141, as a shell tool would, without a traceback.
    """
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print(file=sys.stderr)        # end the line the ^C was typed on
        return 130
    except BrokenPipeError:
        # Python would fail again flushing stdout at exit: send it nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _main(argv=None) -> int:
    parser = _parser()
    # options may come after the sentence
    args, extra = parser.parse_known_intermixed_args(argv)
    if extra:      # argparse counts the sentence after --bogus as its value
        parser.error("unrecognized arguments: " + " ".join(
            [a for a in extra if a.startswith("-")] or extra))
    if args.beam < 1:
        parser.error(f"--beam must be a positive integer, but got {args.beam}")
    if args.sentence == ["-"]:             # the usual name for stdin
        args.sentence = []
    try:
        translator = load_translator(args.checkpoint, args.beam, args.device)
        translator.note_file = sys.stderr  # stdout holds the translations only
        translator.note_prefix = f"{parser.prog}: "
        if args.sentence:
            texts = sentences(args.sentence)
            out = translator(texts if len(texts) > 1 else texts[0],
                             tokens=args.tokens)
            print(out if isinstance(out, str) else "\n".join(out))
            return 0
    except ValueError as e:                # CheckpointError too
        parser.error(str(e))
    if hasattr(sys.stdin, "reconfigure"):   # a byte that is not UTF-8: that
        sys.stdin.reconfigure(errors="surrogateescape")   # line's error only
    status, lines = 0, enumerate(sys.stdin, 1)
    # typed lines are answered at once; piped ones batched
    block = 1 if sys.stdin.isatty() else 256
    if block == 1:                         # a terminal waiting looks like a hang
        print("Type one English sentence per line; Ctrl-D ends.",
              file=sys.stderr)
    while chunk := list(itertools.islice(lines, block)):
        rows = {}
        for n, line in chunk:
            try:
                rows[n] = translator.encode(line.strip())
            except ValueError as e:  # report, keep the output aligned, carry on
                print(f"{parser.prog}: line {n}: {e}", file=sys.stderr)
                status = 1
        out = dict(zip(rows, translator.decode(list(rows.values()))))
        print("\n".join(("" if n not in out
                         else (" " if args.tokens else "").join(out[n]))
                        for n, _ in chunk),
              flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
