"""第 10 章：玩具英译中语料——切分、词表、按长度分桶的批次。

The sentences come from :mod:`tf_tutorial.corpus.grammar`; this module turns them into the splits a
translation model trains and is judged on, and into padded tensors.

Shape legend: B batch, S source length (with EOS); a target batch is (B, T + 1):
BOS, then chapter 10's T target tokens, the last of them EOS.
"""
from __future__ import annotations

import functools
import hashlib
import random
import re
import unicodedata
from dataclasses import dataclass

import torch

from tf_tutorial._checks import (WrongTypeError, _is_integer, require_counts, require_flags, require_integers, require_sizes,
                                 require_token_id)
from tf_tutorial.corpus.grammar import ONES, SCALES, TENS, TITLES, Grammar, number_en

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
MAX_TRAIN_LEN = 40          # English tokens; longer sentences only appear in the "longer" split
# The grammar's version, written into every record trained on the corpus (a record without it
# is version 1). Version 2 (2026-12-05) corrected what a Chinese reader would correct: 老, not 旧,
# for old people and animals (and 矮 for short ones, 短 for short things); 一 只 鞋 (one shoe),
# not 一 双 (a pair); 是 红色 的, not 很 红色; no 正在 before a verb of a moment (看见, 找到);
# 两 千, 两 万; "an honest"; "shabby" for 破旧 (it said "broken"); 在 湖 边, 在 岛 上, 在 森林 里
# (a lake, an island or a forest is no place bare after 在), and "on the island", "in the forest";
# 年轻 的, 干净 的 (two-syllable adjectives take 的); "A , and B" is "A ， B" (而且 says "what is
# more"). It draws the same random choices, so only the sentences with those words changed.
# Version 3 (2026-12-07), from an outside reading of the generated sentences: 一 颗 葡萄 (串 is a
# bunch), 一 个 披萨 (块 is a slice); mass nouns (rice, bread, porridge, tofu) are never counted
# ("a rice", "three breads"), and scissors and noodles are plural only; no "I helped me" or "we met
# us" (the grammar has no myself); 人 (man) takes no adjective (大 人 is an adult, 小 人 a villain);
# the verb call is gone (他 叫 汤姆 reads "his name is Tom"); "there is … in the square" is 广场 上,
# as 在 广场 上 is; and the British "and" before a last part below a hundred (one thousand and
# five). Its draws differ, so every split changed: the records were taken on version 2.
CORPUS_VERSION = 3
NEW_DRAWS = (3,)        # the versions whose grammar draws other sentences than the one before


def same_sentences(a: int, b: int) -> bool:
    """语料的第 ``a`` 版和第 ``b`` 版抽到的英文句子是否相同（只是部分译文不同）。

    Whether corpus versions ``a`` and ``b`` draw the same English sentences
    from the same seed (1 and 2 do: version 2 only changed some Chinese).
    """
    low, high = sorted((a, b))
    return not any(low < v <= high for v in NEW_DRAWS)


def _require_strings(tokens, name: str) -> None:
    """Every token a str: None or 1 would otherwise be a word, or <unk>."""
    bad = [t for t in tokens if not isinstance(t, str)]
    if bad:
        raise TypeError(f"{name}: every token must be a str, but got {bad[0]!r}")


class Vocab:
    """词表：词元与编号的双向对照。

    Token ↔ id. Ids 0-3 are PAD, BOS, EOS, UNK; the rest are sorted for reproducibility.
    """

    def __init__(self, tokens):
        if isinstance(tokens, str):    # would be a vocabulary of letters
            raise TypeError(f"tokens must be a collection of tokens, but got the string {tokens!r}")
        tokens = list(tokens)
        _require_strings(tokens, "tokens")      # before hashing: ["a", []]
        self.itos = list(SPECIALS) + sorted(set(tokens) - set(SPECIALS))
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = range(4)

    def __len__(self) -> int:
        return len(self.itos)

    @property
    def words(self) -> list[str]:
        """词表里的普通词元（去掉 PAD、BOS、EOS、UNK 四个特殊词元）。

        The ordinary tokens, in id order: ``itos`` without the specials.
        """
        return self.itos[len(SPECIALS):]

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def encode(self, tokens, bos: bool = False, eos: bool = False) -> list[int]:
        """把词元换成编号（词表外的词元记作 UNK），可选地在前面加 BOS、在后面加 EOS。"""
        if isinstance(tokens, str):    # would be encoded letter by letter
            raise TypeError(f"tokens must be a list of tokens (e.g. {tokens!r}.split()), but got the "
                            f"string {tokens!r}")
        require_flags(bos=bos, eos=eos)   # bos=2 would add two
        tokens = list(tokens)
        _require_strings(tokens, "tokens")      # None or 1 would be <unk>
        ids = [self.stoi.get(t, self.unk_id) for t in tokens]
        return [self.bos_id] * bool(bos) + ids + [self.eos_id] * bool(eos)

    def decode(self, ids) -> list[str]:
        """把编号换回词元：遇到 EOS 就停，略去 PAD 和 BOS。

        Ids back to tokens, stopping at EOS and leaving out PAD and BOS.
        """
        out = []
        for k, i in enumerate(ids.tolist() if torch.is_tensor(ids) else ids):
            if not _is_integer(i):                          # True would be BOS
                raise WrongTypeError(f"ids: expected one sentence's integer token ids, but got {i!r} "
                                     f"at position {k}")
            if i == self.eos_id:
                break
            if not 0 <= i < len(self.itos):       # itos[-1] would be a word
                raise ValueError(f"token id {i} is out of range for a "
                                 f"vocabulary of {len(self.itos)}")
            if i not in (self.pad_id, self.bos_id):
                out.append(self.itos[i])
        return out


def tokenize_en(text: str) -> list[str]:
    """按语料的切分方式切开一句手打的英文。

    Split a typed English sentence the way the corpus is split: words, "'s", and , . ?
    Any other mark (; : — and the like) is a token of its own, so "China;" keeps
    the known word China; a hyphen inside a word stays ("well-known").
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str (one sentence), but got {type(text).__name__}")
    return re.findall(r"'s\b|[,.?]|\w+(?:-\w+)*|[^\w\s']", text)


_NUMBER = re.compile(r"(?<!\w)(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?!\w)")   # 305,000 one number; 1,2 two; w3 none
TITLE_WORDS = {en for en, _ in TITLES}      # Mr, Ms, Dr, Professor: typed "Dr.", the corpus writes "Dr"
_NOT_WHOLE = re.compile(r"(?<![\w.])-?\d[\d,]*\.\d+|(?<![\w-])-\d[\d,]*")   # 3.5, -5
_CONTRACTIONS = [(re.compile(short, re.IGNORECASE), long) for short, long in (
    (r"\b(do|does|did|is|are|was|were)n't\b", r"\1 not"),                # doesn't → does not
    (r"\b(w)on't\b", r"\1ill not"),                                       # won't → will not
    (r"\b(ca)n't\b", r"\1n not"),                                         # can't → can not
    (r"\b(sha)n't\b", r"\1ll not"),                                       # shan't → shall not
    # any other n't (hasn't, wouldn't): its words, even if the model does not know them; not
    # ain't, whose "ai" is no word (am, is, are, has or have not: left as typed)
    (r"\b(?!ain't)(\w+)n't\b", r"\1 not"),
    (r"\b(I)'m\b", r"\1 am"),                                             # I'm → I am
    (r"\b(you|we|they)'re\b", r"\1 are"),                                 # they're → they are
    (r"\b(I|you|we|they|he|she)'ll\b", r"\1 will"),                      # we'll → we will
    (r"\b(I|you|we|they)'ve\b", r"\1 have"),                              # I've → I have
    # after these words 's is never the possessive (the corpus has no "has"), unless "He" is
    # a surname (Professor He's book: 何 教授 的 书)
    ("".join(rf"(?<!\b{t} )(?<!\b{t}\. )" for t in sorted(TITLE_WORDS))
     + r"\b(he|she|it|that|there|here|what|who|where|how)'s\b", r"\1 is"))]   # he's → he is
_TENS_UNITS = re.compile(r"\b(twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)-"
                         r"(one|two|three|four|five|six|seven|eight|nine)\b", re.IGNORECASE)  # twenty-two
_FINAL = {".", "?"}


def _not_whole(number: str) -> str:
    """The message for a typed number the model cannot read (0, 3.5, -5, 10^9)."""
    return (f"number {number} is not a whole number from 1 to 999,999,999: only those are known "
            "to the model")


def _number_words(match: re.Match) -> str:
    if match.group().startswith("0") and len(match.group()) > 1:     # 000 of "10 000", 05
        raise ValueError(f"number {match.group()} starts with 0: write a number without leading "
                         "zeros, spaces or stray commas inside it (10000 or 10,000; not 10 000, "
                         "1,0000 or 007)")
    n = int(match.group().replace(",", ""))
    if not 1 <= n < 10**9:
        raise ValueError(_not_whole(match.group()))
    return " " + " ".join(number_en(n)) + " "


_NUMERALS = {w: v for v, w in enumerate(ONES) if v} | {w: 10 * v for v, w in enumerate(TENS) if v > 1}


def _numeral_run(words: list[str], i: int) -> int:
    """How many words from ``words[i]`` may belong to one typed number: numerals, scales, "and"
    between them, and "a" before a scale ("a hundred")."""
    j = i
    while j < len(words):
        w, before, after = (words[j].lower(), words[j - 1].lower() if j > i else "",
                            words[j + 1].lower() if j + 1 < len(words) else "")
        if (w in _NUMERALS or w in SCALES and j > i
                or w == "and" and j > i and (before in _NUMERALS or before in SCALES)
                and after in _NUMERALS
                or w == "a" and j == i and after in SCALES):
            j += 1
        else:
            break
    return j - i


def _read_numeral(words: list[str]) -> int | None:
    """The value of typed number words, if they are the corpus's words for it up to "and"s and
    "a" for "one" ("one thousand and one", "a hundred", "three hundred five"); else None."""
    total = current = 0
    for w in words:
        if w in _NUMERALS:
            current += _NUMERALS[w]
        elif w == "hundred":
            current = (current or 1) * 100
        elif w in SCALES:
            total, current = total + (current or 1) * SCALES[w], 0
    n = total + current
    bare = [w for w in words if w != "and"]
    if not 1 <= n < 10**9 or [w if w != "a" else "one" for w in bare] != [
            w for w in number_en(n) if w != "and"]:
        return None
    return n


def _corpus_numbers(words: list[str]) -> list[str]:
    """Rewrite typed number words the way the corpus writes them (:func:`number_en`):
    "one thousand and one" → one thousand one, "a hundred" → one hundred, "three hundred five" →
    three hundred and five. Words that are not one number ("two three") are left as typed."""
    out, i = [], 0
    while i < len(words):
        run = _numeral_run(words, i)
        for n in range(run, 0, -1):                   # the longest prefix that reads as a number
            if words[i + n - 1].lower() in ("and", "a"):
                continue                              # "three and two": and stays a word
            value = _read_numeral([w.lower() for w in words[i:i + n]])
            if value is not None:
                out += number_en(value)
                i += n
                break
        else:
            out.append(words[i])
            i += 1
    return out


def _known(word: str, vocab: Vocab, first: bool = False, surname: bool = False) -> str | None:
    """The vocabulary's spelling of ``word``: as typed, else lowercase ("The"), else capitalised ("china").

    ``first``: the sentence's first word, whose capital says nothing; lowercase comes first there
    ("He runs." is the pronoun he, not the surname He), except for a title ("Professor Wang").
    ``surname``: the word follows a title, so the capitalised form comes first ("ms long" is
    Ms Long, not Ms and the adjective long).
    """
    forms = [word, word.lower(), word[:1].upper() + word[1:].lower()]
    if first and word not in TITLE_WORDS:
        forms.insert(0, word.lower())
    if surname:
        forms.insert(0, word[:1].upper() + word[1:].lower())
    for form in forms:
        if form in vocab:
            return form
    return None


# after NFKC: the two marks it leaves, ‘ and ’ read as ', and no quotes or brackets (the corpus has none)
_TYPED = str.maketrans({"。": ".", "、": ",", "‘": "'", "’": "'", **{c: " " for c in '"“”„«»「」『』()[]{}《》〈〉'}})


def normalise(text: str, src_vocab: Vocab) -> list[str]:
    """把一句手打的英文改写成语料的写法，再切成词元。

    A typed English sentence → tokens written the way the corpus writes them.

    In order: invisible format characters go (a byte-order mark; a zero-width space becomes a
    space); full-width
    characters typed with a Chinese input method become
    their ASCII forms (。，？！ and full-width digits: Unicode NFKC, plus 。 → . and
    、 → ,), ‘ and ’ become ', and quotes and brackets go ("“I love China”" → I love
    China .); digits become number words (305000 and 305,000 → three hundred and five
    thousand; 1 to 999,999,999 only, like the corpus); "!" becomes ".";
    "doesn't" becomes "does not" (do, does, did, is, are, was, were), "won't" "will not", any other
    n't its two words (can't → can not, shan't → shall not, hasn't → has not), and "I'm",
    "you're", "we'll", "I've", "he's" their long forms (am, are, will, have, is: the corpus has
    no "have", so it is named as an unknown word, as "ve" was; after he, she, it, that, there,
    here, what, who, where and how 's is "is", never the possessive, except for the surname He
    after a title: Professor He's book); "twenty-two" becomes
    "twenty two", and typed number words are written as the corpus writes them ("one thousand one" →
    one thousand and one, "a hundred" → one hundred, "three hundred five" → three hundred and five);
    :func:`~tf_tutorial.corpus.data.tokenize_en` splits off , . ? and 's (and any other mark, as an
    unknown token of its own: "China;" → China ;); words the vocabulary holds
    as one token are joined ("ice cream"); each word takes the vocabulary's case (:func:`_known`);
    the period of a title ("Dr.") is dropped; a run of end marks ("?!", "...") keeps its first;
    trailing commas go, and a "." is added unless the sentence ends with "." or "?", as every
    corpus sentence does. Unknown words are kept as typed.

    Args:
        text: one English sentence.
        src_vocab: the model's source vocabulary.
    Returns:
        The tokens, e.g. "The dog bites the man!" → ['the', 'dog', 'bites', 'the', 'man', '.'].
    Raises:
        ValueError: an empty sentence (or one of punctuation only), a number out of range or
            not whole (3.5, -5) or with a leading 0 (007, and the 000 of "10 000"), or text with a
            byte that is not UTF-8 (read with errors="surrogateescape", as stdin is).
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str (one sentence), but got {type(text).__name__}")
    # invisible format characters (a Windows editor's byte-order mark, a word joiner) are not
    # words; a zero-width space pasted from the web still separates two
    given = "".join(" " if c == "\u200b" else c for c in text
                    if c == "\u200b" or unicodedata.category(c) != "Cf").strip()
    undecoded = re.search("[\udc80-\udcff]", given)     # a byte read with surrogateescape
    if undecoded:
        raise ValueError(f"text holds the byte 0x{ord(undecoded.group()) - 0xdc00:02x}, "
                         "which is not UTF-8: save the text as UTF-8")
    text = unicodedata.normalize("NFKC", given).translate(_TYPED)
    bad = _NOT_WHOLE.search(text)
    if bad:
        raise ValueError(_not_whole(bad.group()))
    text = text.replace("!", ".")
    for short, long in _CONTRACTIONS:
        text = short.sub(long, text)
    text = _TENS_UNITS.sub(r"\1 \2", text)
    words = _corpus_numbers(tokenize_en(_NUMBER.sub(_number_words, text)))
    if not any(re.search(r"\w", w) for w in words):              # "", "   ", "...", "?", ";"
        raise ValueError(f"no words in {given!r}, only punctuation" if given
                         else "empty sentence")
    longest = max(t.count(" ") for t in src_vocab.itos) + 1           # words in the longest token
    tokens, i = [], 0
    while i < len(words):
        for n in range(min(longest, len(words) - i), 0, -1):          # the longest match wins
            form = _known(" ".join(words[i:i + n]), src_vocab, first=i == 0,
                          surname=bool(tokens) and tokens[-1] in TITLE_WORDS)
            if form or n == 1:
                tokens.append(form or words[i])
                i += n
                break
    tokens = [t for k, t in enumerate(tokens)
              if not (t == "." and 0 < k < len(tokens) - 1 and tokens[k - 1] in TITLE_WORDS)
              and not (t in _FINAL and k > 0 and tokens[k - 1] in _FINAL)]
    while tokens and tokens[-1] == ",":
        tokens.pop()
    if not tokens or tokens[-1] not in _FINAL:
        tokens.append(".")
    return tokens


@dataclass
class Corpus:
    """语料的各个切分（英文词元和中文词元的句对列表）及两个词表。

    The splits as lists of (English tokens, Chinese tokens), and the two vocabularies.

    train / valid / test come from one distribution (nesting depth ≤ 2, at most
    ``MAX_TRAIN_LEN`` English tokens). The two generalisation splits each aim at one thing,
    and both are drawn from a clause-dense setting of the grammar (more relative clauses and
    coordination than training), which chapter 10 controls for:
    ``longer``: the same depth, but every sentence is longer than any training sentence;
    ``deeper``: relative clauses nested 3 deep, but lengths (both sides) within the training
    split's own longest (a large training split, such as chapter 10's, reaches ``MAX_TRAIN_LEN``
    English tokens; a small one stops short of it, and so does its deeper split).

    The two generalisation splits are drawn the first time they are read: a few seconds of
    rejection sampling that a run which only trains (``python -m tf_tutorial.train``) never
    needs. They hold the same sentences whenever, and in whichever order, they are read.
    """

    train: list
    valid: list
    test: list
    src_vocab: Vocab
    tgt_vocab: Vocab
    seed: int
    n_longer: int = 500
    n_deeper: int = 500

    @functools.cached_property
    def longer(self) -> list:
        """两个训练深度的并列小句，每句都比任何训练句子长（第一次读取时才生成）。"""
        seen = _english(self.test, self.valid, self.train)    # none of them again
        return _collect(Grammar(random.Random(self.seed + 1), max_depth=2, rel_p=0.9, question_p=0.0,
                                coord_p=1.0),
                        self.n_longer, lambda en, zh, d: len(en) > MAX_TRAIN_LEN, seen, 400 * self.n_longer)

    @functools.cached_property
    def deeper(self) -> list:
        """三层嵌套的关系从句，两边的长度都不超过训练集（第一次读取时才生成）。"""
        # nor one of the longer split (drawn first if it is not yet)
        seen = _english(self.test, self.valid, self.train, self.longer)
        max_en = max(len(en) for en, _ in self.train)   # MAX_TRAIN_LEN, or less in a small split
        max_zh = max(len(zh) for _, zh in self.train)
        return _collect(Grammar(random.Random(self.seed + 2), max_depth=3, rel_p=0.9, deep=True),
                        self.n_deeper,
                        lambda en, zh, d: d == 3 and len(en) <= max_en and len(zh) <= max_zh,
                        seen, 400 * self.n_deeper,
                        hint=f" (the deeper split stays within the training split's lengths, {max_en} English "
                             f"and {max_zh} Chinese tokens here: a larger n_train, or a smaller n_deeper, helps)")

    SPLITS = ("train", "valid", "test", "longer", "deeper")

    def splits(self) -> dict:
        """按名字返回全部切分：``{"train": [...], "valid": [...], ...}``。"""
        return {name: getattr(self, name) for name in self.SPLITS}

    def identity(self) -> dict:
        """这份语料是哪一份：种子、各切分的大小、语料版本，和三个主要切分句子的 SHA-256。

        Which corpus this is: what :func:`make_corpus` takes to draw it again (the seed and the
        five split sizes), the corpus version and a SHA-256 of the train / valid / test sentences
        (the generalisation splits are drawn only when read). A checkpoint keeps it, so that
        resuming trains and scores on the same splits (equal vocabularies do not show it: from
        about 20,000 sentences every seed has the same words).
        """
        digest = hashlib.sha256()
        for split in (self.train, self.valid, self.test):
            for en, zh in split:
                digest.update((" ".join(en) + "\t" + " ".join(zh) + "\n").encode())
            digest.update(b"\f")                                       # where a split ends
        return {"seed": int(self.seed), "n_train": len(self.train), "n_valid": len(self.valid),
                "n_test": len(self.test), "n_longer": self.n_longer, "n_deeper": self.n_deeper,
                "version": CORPUS_VERSION, "sha256": digest.hexdigest()}

    def summary(self) -> dict:
        """逐个切分统计句对数，以及英文和中文的句长。

        Per split: the number of pairs and the English and Chinese lengths.
        """
        out = {}
        for name, split in self.splits().items():
            en, zh = [len(e) for e, _ in split], [len(z) for _, z in split]
            out[name] = {"pairs": len(split), "mean_en_len": round(sum(en) / len(en), 1), "max_en_len": max(en),
                         "min_en_len": min(en), "max_zh_len": max(zh)}
        return out


def _english(*splits) -> set:
    """The English sentences of ``splits``, joined: the keys :func:`_collect` keeps apart."""
    return {" ".join(en) for split in splits for en, _ in split}


def _collect(grammar: Grammar, n: int, keep, seen: set, tries: int,
             hint: str = "") -> list:
    """Draw sentences until ``n`` distinct ones pass ``keep(en, zh, depth)``;
    ``hint`` ends the error message when too few do."""
    out = []
    for _ in range(tries):
        en, zh, depth = grammar.sentence()
        key = " ".join(en)
        if key not in seen and keep(en, zh, depth):
            seen.add(key)
            out.append((en, zh))
            if len(out) == n:
                return out
    raise ValueError(f"the grammar produced only {len(out)} suitable distinct sentences in {tries} tries; "
                     f"asked for {n}{hint}")


def make_corpus(n_train: int = 100_000, n_valid: int = 1000, n_test: int = 1000,
                n_longer: int = 500, n_deeper: int = 500, seed: int = 0) -> Corpus:
    """由种子确定地生成语料；同一个英文句子不会出现在两个切分里。

    Deterministic from ``seed``; no English sentence is in two splits (see :class:`Corpus`).
    """
    sizes = (("n_train", n_train), ("n_valid", n_valid), ("n_test", n_test), ("n_longer", n_longer),
             ("n_deeper", n_deeper))
    require_sizes(**dict(sizes))          # NumPy integers are integers too
    require_integers(seed=seed)           # None would seed from the clock
    n_train, n_valid, n_test, n_longer, n_deeper, seed = map(
        int, (n_train, n_valid, n_test, n_longer, n_deeper, seed))
    seen: set = set()
    need = n_test + n_valid + n_train
    pairs = _collect(Grammar(random.Random(seed), max_depth=2), need,
                     lambda en, zh, d: len(en) <= MAX_TRAIN_LEN, seen, 50 * need)
    test, valid, train = pairs[:n_test], pairs[n_test:n_test + n_valid], pairs[n_test + n_valid:]
    src = Vocab(t for en, _ in train for t in en)
    tgt = Vocab(t for _, zh in train for t in zh)
    # the longer and deeper splits are drawn when first read (see Corpus)
    return Corpus(train, valid, test, src, tgt, seed, n_longer, n_deeper)


def encode_pairs(pairs, src_vocab: Vocab, tgt_vocab: Vocab):
    """把（英文, 中文）词元句对换成编号：源序列末尾加 EOS，目标序列前后加 BOS 和 EOS。

    (English, Chinese) tokens → (source ids + EOS, BOS + target ids + EOS).
    """
    return [(src_vocab.encode(en, eos=True), tgt_vocab.encode(zh, bos=True, eos=True)) for en, zh in pairs]


def pad(seqs, pad_id: int) -> torch.Tensor:
    """把若干编号列表在右边填充成一个 (B, L) 的 LongTensor。

    Lists of ids → (B, L) LongTensor, right-padded with ``pad_id``.
    """
    require_token_id(pad_id=pad_id)          # True would pad with 1, BOS
    require_counts(pad_id=pad_id)            # ids start at 0
    if not len(seqs):
        raise ValueError("seqs is empty: expected at least one list of ids")
    out = torch.full((len(seqs), max(len(s) for s in seqs)), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        if not len(s):
            continue
        row = torch.as_tensor(s)
        if row.is_floating_point() or row.is_complex() or row.dtype == torch.bool:
            # a cast to long would cut 1.7 to 1 without a word
            raise WrongTypeError(f"seqs[{i}]: expected integer token ids, but got {row.dtype} values")
        out[i, :len(s)] = row
    return out


def batch_indices(lengths, batch_size: int | None = None, max_tokens: int | None = None,
                  shuffle: bool = True, seed: int = 0) -> list[list[int]]:
    """把长度相近的句子分进同一批（分桶），让填充尽量少。

    Group sentence indices into batches of similar length (bucketing), so little is padding.

    ``lengths``: one (source length, target length) per sentence. Sentences are sorted by length
    within pools of about 50 batches and cut into batches; the batches are then shuffled.
    A batch holds ``batch_size`` sentences, or, with ``max_tokens``, as many as fit in
    ``max_tokens`` padded tokens on its longer side (the paper's "about 25000 tokens"): short
    sentences then come in large batches and long ones in small batches. Give one of the two;
    with neither, a batch holds 64 sentences.
    """
    if batch_size is None and max_tokens is None:
        batch_size = 64
    if batch_size is not None and max_tokens is not None:
        raise ValueError(f"give exactly one of batch_size and max_tokens, but got batch_size={batch_size!r}, "
                         f"max_tokens={max_tokens!r}")
    limit = batch_size if batch_size is not None else max_tokens
    require_sizes(**{"batch_size" if batch_size is not None else "max_tokens": limit})
    require_flags(shuffle=shuffle)
    require_integers(seed=seed)       # None would shuffle by the clock
    limit = int(limit)
    bad = next((i for i, pair in enumerate(lengths)
                if not isinstance(pair, (tuple, list)) or len(pair) != 2), None)
    if bad is not None:
        raise ValueError(f"lengths: expected one (source length, target length) pair per "
                         f"sentence, but got {lengths[bad]!r} at index {bad}")
    if max_tokens is not None and lengths and max(max(pair) for pair in lengths) > max_tokens:
        raise ValueError(f"max_tokens={max_tokens} is smaller than the longest sentence "
                         f"({max(max(pair) for pair in lengths)} tokens)")
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    if shuffle:
        rng.shuffle(order)
    mean_len = sum(max(pair) for pair in lengths) / max(len(lengths), 1)
    pool = 50 * (batch_size or max(1, int(max_tokens / max(mean_len, 1))))
    chunks = []
    for start in range(0, len(order), pool):
        idx = sorted(order[start:start + pool], key=lambda i: lengths[i])
        if batch_size is not None:
            chunks += [idx[j:j + batch_size] for j in range(0, len(idx), batch_size)]
            continue
        chunk, longest = [], 0
        for i in idx:
            longest_with_i = max(longest, *lengths[i])
            if chunk and (len(chunk) + 1) * longest_with_i > max_tokens:
                chunks.append(chunk)
                chunk, longest_with_i = [], max(lengths[i])
            chunk.append(i)
            longest = longest_with_i
        chunks.append(chunk)
    if shuffle:
        rng.shuffle(chunks)
    return chunks


def batches(encoded, batch_size: int | None = None, pad_id: int = 0, shuffle: bool = True, seed: int = 0,
            max_tokens: int | None = None):
    """按 :func:`batch_indices` 的分组产生填充好的批次。

    Padded batches from :func:`batch_indices` (64 sentences each unless ``batch_size`` or
    ``max_tokens`` says otherwise). Yields ``(src (B, S), tgt (B, T + 1))``.
    """
    lengths = [(len(src), len(tgt)) for src, tgt in encoded]
    for chunk in batch_indices(lengths, batch_size, max_tokens, shuffle, seed):
        yield pad([encoded[i][0] for i in chunk], pad_id), pad([encoded[i][1] for i in chunk], pad_id)
