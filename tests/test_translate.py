"""tf_tutorial.translate: normalisation, the Python API and the command line, on a 20-step model.

A 20-step model translates badly; these tests check the plumbing (normalisation, batching,
joining, errors), comparing with greedy_decode / beam_search on the same ids of the same model.
"""
import dataclasses
import io
import os
import re
import subprocess
import sys

import pytest
import torch

from tf_tutorial.corpus.data import Vocab, make_corpus, normalise
from tf_tutorial.decode import beam_search, greedy_decode
from tf_tutorial.decode import load_translator as load_from_decode
from tf_tutorial.decode import translate as translate_in_memory
from tf_tutorial.train import CONFIGS, CheckpointError, train
from tf_tutorial.translate import load_translator, main, sentences

PROG = "python -m tf_tutorial.translate"


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    corpus = make_corpus(n_train=1500, n_valid=50, n_test=20, n_longer=2, n_deeper=2, seed=0)
    # 30 steps: with 20, the model of corpus version 2 wrote <eos> first for every candidate below
    train(dataclasses.replace(CONFIGS["tiny"], steps=40, n_train=1500), out_dir=out, corpus=corpus, progress=False)
    return str(out / "checkpoint.pt")


@pytest.fixture(scope="module")
def t(ckpt):
    return load_translator(ckpt, device="cpu")


def reference(t, tokens, beam_size=1):
    """What the model gives for already-normalised tokens, decoded without the translator."""
    src = torch.tensor([t.src_vocab.encode(tokens, eos=True)])
    ids = greedy_decode(t.model, src) if beam_size == 1 else beam_search(t.model, src, beam_size)
    return t.tgt_vocab.decode(ids[0])


DOG = ["the", "dog", "bites", "the", "man", "."]
BOOKS = ["I", "bought", "three", "hundred", "and", "five", "thousand", "books", "."]


def test_vocab_rebuilt_from_checkpoint_keeps_ids(ckpt, t):
    state = torch.load(ckpt, weights_only=False)
    assert Vocab(state["src_itos"][4:]).itos == state["src_itos"] == t.src_vocab.itos
    assert Vocab(state["tgt_itos"][4:]).itos == state["tgt_itos"] == t.tgt_vocab.itos


def test_normalise_case_punctuation_numbers(t):
    v = t.src_vocab
    assert "The" not in v and "the" in v
    assert normalise("The dog bites the man.", v) == DOG
    assert normalise("  The dog bites the man!", v) == DOG
    assert normalise("the dog bites the man", v) == DOG
    assert normalise("does the dog bite the man?", v)[-1] == "?"
    assert normalise("I bought 305000 books.", v) == BOOKS
    assert normalise("I bought 305,000 books.", v) == BOOKS
    assert normalise("I bought 1,2 books", v) == ["I", "bought", "one", ",", "two", "books", "."]
    assert normalise("I love w3", Vocab(["I", "love", "w3", "."])) == ["I", "love", "w3", "."]


def test_normalise_multiword_tokens_titles_and_capitals():
    v = Vocab(["the", "dog", "ice cream", "Dr", "Jiang", "China", "I", "love", "'s", ".", ",", "?"])
    assert normalise("Dr. Jiang's dog likes Ice Cream!", v) == ["Dr", "Jiang", "'s", "dog", "likes", "ice cream", "."]
    assert normalise("i love china,", v) == ["I", "love", "China", "."]


def test_normalise_reads_a_typed_sentence_as_the_corpus_writes_it():
    v = Vocab(["he", "He", "Mr", "Professor", "professor", "does", "did", "not", "run", "runs", "Wang",
               "China", "I", "love", "the", ".", "?"])
    assert normalise("He runs.", v) == ["he", "runs", "."]                 # the pronoun, not the surname
    assert normalise("Mr He runs.", v) == ["Mr", "He", "runs", "."]        # the surname, after a title
    assert normalise("mr he runs.", v) == ["Mr", "He", "runs", "."]        # typed in lowercase too
    assert normalise("Professor Wang runs.", v)[0] == "Professor"          # a title keeps its capital
    assert normalise("The professor runs.", v)[1] == "professor"
    assert normalise("He doesn't run.", v) == ["he", "does", "not", "run", "."]
    assert normalise("He DIDN’T run!", v) == ["he", "did", "not", "run", "."]
    w = Vocab(["I", "am", "you", "are", "we", "will", "not", "they", "happy", "go", "."])
    assert normalise("I'm happy.", w) == ["I", "am", "happy", "."]          # was ["I", "m", ...]
    assert normalise("You’re happy.", w) == ["you", "are", "happy", "."]
    assert normalise("We'll go.", w) == normalise("we will go", w)
    assert normalise("They won't go.", w) == ["they", "will", "not", "go", "."]
    assert normalise("I've a dog.", w)[:2] == ["I", "have"]                # was ["I", "ve", ...]
    assert normalise("Where's the dog?", v)[:2] == ["Where", "is"]         # was ["Where", "'s", ...]
    assert normalise("How's he?", v)[:2] == ["How", "is"]
    assert normalise("I love China!!", v) == normalise("I love China...", v) == ["I", "love", "China", "."]
    assert normalise("Does he run?!", v)[-2:] == ["run", "?"]


def test_normalise_reads_other_typed_forms_or_names_them(t):
    v = t.src_vocab
    assert normalise("I love\u200b China\u2060.", v) == normalise("I love China.", v)  # zero-width
    assert normalise("the dog\u200bbites the man", v)[:3] == ["the", "dog", "bites"]      # still a space
    assert normalise("I ain't here", v)[:2] == ["I", "ain"]                # not "ai not"
    assert normalise("He can't run.", v)[:3] == ["he", "can", "not"]          # was can ' t
    assert normalise("He hasn't run.", v)[:3] == ["he", "has", "not"]
    assert normalise("They shan't go.", v)[:3] == ["they", "shall", "not"]
    for typed, number in (("10 000", "000"), ("1,0000", "0000"), ("007", "007")):
        with pytest.raises(ValueError, match=rf"^number {number} starts with 0: write a number without "
                                             r"leading zeros, spaces or stray commas inside it \(10000 or "
                                             r"10,000; not 10 000, 1,0000 or 007\)$"):
            normalise(f"I bought {typed} books.", v)
    with pytest.raises(ValueError, match=r"^text holds the byte 0xff, which is not UTF-8"):
        normalise("I love China\udcff.", v)                 # as stdin reads it (surrogateescape)


@pytest.mark.parametrize("number", ["3.5", "-5", "1,000.5", "0.5"])
def test_a_number_that_is_not_whole_is_refused_by_value(t, number):
    with pytest.raises(ValueError, match=f"^number {re.escape(number)} is not a whole number from 1 to "):
        normalise(f"I bought {number} books.", t.src_vocab)


def test_every_test_sentence_normalises_to_itself(ckpt):
    from tf_tutorial.corpus.data import make_corpus
    corpus = make_corpus(20_000, seed=1)   # every word of valid and test in the vocabulary
    for en, _ in corpus.test + corpus.valid:
        typed = " ".join(en).replace(" .", ".").replace(" ?", "?").replace(" ,", ",").replace(" 's", "'s")
        assert normalise(typed[0].upper() + typed[1:], corpus.src_vocab) == en, typed


def test_he_s_after_a_title_is_the_surname_he_with_a_possessive():
    """he's → he is, but the surname He (何) takes a possessive: Professor He's book is 何 教授 的 书."""
    from tf_tutorial.corpus.data import make_corpus
    vocab = make_corpus(20_000, seed=1).src_vocab
    assert normalise("He's reading.", vocab) == ["he", "is", "reading", "."]
    for title in ("Professor", "Mr", "Mr.", "dr"):
        assert normalise(f"We want {title} He's book.", vocab)[2:5] == [title.strip(".").capitalize(), "He", "'s"]


def test_normalise_reads_full_width_punctuation_and_digits(t):
    """A Chinese input method types 。，？！ and full-width digits: "China。" was an unknown word."""
    v = t.src_vocab
    assert normalise("The dog bites the man。", v) == DOG
    assert normalise("The dog bites the man！", v) == DOG
    assert normalise("does the dog bite the man？", v) == normalise("does the dog bite the man?", v)
    assert normalise("I bought ３０５０００ books。", v) == BOOKS
    assert normalise("I bought 305，000 books.", v) == BOOKS


def test_quotes_and_brackets_go_and_other_marks_stand_alone(t):
    """“China，” and China； were unknown words: the quote or the mark stuck to the word."""
    v = t.src_vocab
    assert normalise("“The dog bites the man。”", v) == DOG
    assert normalise("「The dog bites the man.」", v) == DOG
    assert normalise("‘The dog bites the man’", v) == DOG
    assert normalise("(The dog) bites the man.", v) == DOG
    assert normalise("The dog bites the man；", v) == DOG[:-1] + [";", "."]     # ; is unknown, man is not
    assert normalise("the man——the dog", v)[:4] == ["the", "man", "—", "—"]
    assert normalise("Tom's dog", Vocab(["Tom", "'s", "dog", "."])) == ["Tom", "'s", "dog", "."]


def test_typed_number_words_are_written_as_the_corpus_writes_them(t):
    """The corpus writes "one thousand one" and "three hundred and five": a reader who types "one
    thousand and one" or "a hundred" gave the model forms it never saw in training."""
    v = t.src_vocab
    assert normalise("I bought one thousand and one books.", v) == normalise("I bought 1001 books.", v)
    assert normalise("I bought a hundred books.", v) == normalise("I bought 100 books.", v)
    assert normalise("I bought three hundred five thousand books.", v) == BOOKS
    assert normalise("I bought Three Hundred And Five Thousand books.", v) == BOOKS
    w = Vocab(["I", "saw", "a", "and", "cats", "dog", "two", "three", "hundred", "."])
    assert normalise("I saw three and two cats.", w) == ["I", "saw", "three", "and", "two", "cats", "."]
    assert normalise("I saw two three cats.", w) == ["I", "saw", "two", "three", "cats", "."]  # not one number
    assert normalise("I saw a dog.", w) == ["I", "saw", "a", "dog", "."]                 # an article stays


@pytest.mark.parametrize("text", ["", "   ", "\t", "\ufeff", "\ufeff  \n"])
def test_normalise_empty(t, text):
    with pytest.raises(ValueError, match="^empty sentence$"):
        normalise(text, t.src_vocab)


@pytest.mark.parametrize("text", ["'", ".", "!", "...", ",", "？", "。", ", .", "；", "“”", "(—)", " !? "])
def test_a_sentence_of_punctuation_only_is_refused_as_such(t, text):
    """It is not empty: the message says what the reader typed and what is missing."""
    with pytest.raises(ValueError, match=f"^no words in {re.escape(repr(text.strip()))}, only punctuation$"):
        normalise(text, t.src_vocab)


def test_a_byte_order_mark_is_not_a_word(t):
    """A Windows editor starts a UTF-8 file with U+FEFF; the first line read from it carries the mark."""
    assert normalise("\ufeffI love China.", t.src_vocab) == normalise("I love China.", t.src_vocab)


@pytest.mark.parametrize("number", ["0", "1000000000", "1,000,000,000", "3.5", "-5"])
def test_number_out_of_range(t, number):
    """Too big, zero, a fraction or a negative: one message, quoting the number as typed."""
    with pytest.raises(ValueError, match=f"^number {re.escape(number)} is not a whole number from 1 to "
                                         "999,999,999: only those are known to the model$"):
        t(f"I bought {number} books.")


def test_translation_equals_greedy_on_normalised_ids(t):
    assert t("The dog bites the man.") == "".join(reference(t, DOG))
    # joining needs an output of two tokens or more: a 30-step model's output length changes
    # with any change to training, so take the first of several sentences that has one
    candidates = [DOG, BOOKS, ["the", "man", "bites", "the", "dog", "."], ["the", "dog", "runs", "."],
                  ["i", "love", "china", "."], ["i", "bought", "a", "book", "yesterday", "."]]
    tokens, want = next(((c, w) for c in candidates if len(w := reference(t, c)) >= 2), (None, None))
    assert tokens is not None, "no candidate sentence gives two output tokens"
    text = " ".join(tokens)
    assert t(text) == "".join(want)
    assert t(text, tokens=True) == " ".join(want)
    assert " " not in t(text)
    books = {t(s) for s in ("I bought 305000 books.", "I bought 305,000 books.",
                            "I bought three hundred and five thousand books .")}
    assert books == {"".join(reference(t, BOOKS))}


def test_list_input_batches_like_single_calls(t):
    sentences = ["The dog bites the man.", "I bought 305,000 books.", "the man bites the dog", "The dog runs."]
    assert t(sentences) == [t(s) for s in sentences]
    assert t(sentences, tokens=True) == [t(s, tokens=True) for s in sentences]
    assert t([]) == []
    with pytest.raises(ValueError, match="^sentence 2: empty sentence$"):
        t(["The dog runs.", " "])


def test_beam_equals_beam_search(ckpt, t):
    t2 = load_translator(ckpt, beam_size=2, device="cpu")
    assert t2("The dog bites the man.") == "".join(reference(t2, DOG, beam_size=2))
    assert "beam_size=2" in repr(t2)
    with pytest.raises(ValueError, match="beam_size must be a positive integer"):
        load_translator(ckpt, beam_size=0)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_a_bad_batch_size_is_refused_when_the_translator_is_made(t, bad):
    from tf_tutorial.translate import Translator
    with pytest.raises(ValueError, match=f"^batch_size must be a positive integer, but got {bad}$"):
        Translator(t.model, t.src_vocab, t.tgt_vocab, batch_size=bad)


def test_the_translator_refuses_a_model_or_vocabularies_it_cannot_use(t):
    from tf_tutorial.corpus.data import Vocab
    from tf_tutorial.translate import Translator
    src, tgt = t.src_vocab, t.tgt_vocab
    assert len(src) != len(tgt)
    with pytest.raises(TypeError, match="^model must be a Transformer, but got str$"):
        Translator("runs/cpu/checkpoint.pt", src, tgt)
    with pytest.raises(TypeError, match="^tgt_vocab must be a Vocab, but got int$"):
        Translator(t.model, src, 5)
    with pytest.raises(TypeError, match="^src_vocab must be a Vocab, but got list$"):
        Translator(t.model, src.itos, tgt)
    with pytest.raises(ValueError, match=(
            f"^src_vocab has {len(tgt)} tokens and tgt_vocab {len(src)}, but the model was built "
            f"for src_vocab_size={len(src)} and tgt_vocab_size={len(tgt)}: are the two "
            "vocabularies swapped\\?$")):
        Translator(t.model, tgt, src)
    short = Vocab(src.words[:-1])
    with pytest.raises(ValueError, match=(f"^src_vocab has {len(src) - 1} tokens, but the model "
                                          f"was built for src_vocab_size={len(src)}$")):
        Translator(t.model, short, tgt)


def test_repr(ckpt, t):
    r = repr(t)
    assert ckpt in r and f"src_vocab={len(t.src_vocab)}" in r and f"tgt_vocab={len(t.tgt_vocab)}" in r
    assert "beam_size=1" in r and "max_tokens=159" in r


def test_too_long_sentence_names_limit(t):
    assert t.max_tokens == t.model.config.max_len - 1 == 159
    assert isinstance(t("dog " * 158), str)   # 158 words + "." = 159 tokens: just fits
    msg = "^sentence has 160 tokens after normalisation; this model accepts at most 159$"
    with pytest.raises(ValueError, match=msg):
        t("dog " * 159)


def test_unknown_word_noted_not_fatal(t, capsys):
    out = t("The xyzzy bites the man.")
    note = capsys.readouterr().out               # a notebook shows stdout; the CLI sends notes to stderr
    assert note == "注意：['xyzzy'] 不在词表中，按 <unk> 处理：'The xyzzy bites the man.'\n"
    assert out == "".join(reference(t, ["the", "xyzzy", "bites", "the", "man", "."]))
    t("The xyzzy bites the man.", warn=False)
    assert capsys.readouterr().out == ""


def test_decode_module_offers_the_same_translator(t):
    loaded = load_from_decode(t.path)
    assert loaded("The dog bites the man.") == t("The dog bites the man.")
    spaced = translate_in_memory(t.model, ["The dog bites the man.", "I bought 305000 books."], t.src_vocab,
                                 t.tgt_vocab)
    assert spaced == t(["The dog bites the man.", "I bought 305000 books."], tokens=True)


def test_checkpoint_errors(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_translator(tmp_path / "missing.pt")
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match=r"not a readable checkpoint \(not a file torch\.save wrote, .*; "
                                         r"torch\.load\(weights_only=True\): Unsupported operand \d+\)$"):
        load_translator(tmp_path / "bad.pt")          # what torch.load said, not its page of advice
    torch.save({"weights": 1}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a tf_tutorial training checkpoint"):
        load_translator(tmp_path / "other.pt")


def test_a_checkpoint_whose_weights_do_not_fit_names_the_tensors(ckpt, tmp_path):
    """PyTorch's first line says only "Error(s) in loading state_dict for Transformer:"; the
    tensors it names come on the lines after it."""
    state = torch.load(ckpt, weights_only=False)
    del state["model"]["out.weight"]
    state["model"]["src_embed.table.weight"] = torch.zeros(3, 3)
    torch.save(state, tmp_path / "wrong.pt")
    with pytest.raises(CheckpointError) as info:
        load_translator(tmp_path / "wrong.pt")
    message = str(info.value)
    assert message.startswith(f"checkpoint {tmp_path / 'wrong.pt'} holds no usable model: ")
    assert "out.weight" in message and "size mismatch for src_embed.table.weight" in message
    assert "\n" not in message
    with pytest.raises(TypeError, match=r"^path: expected a file or folder name \(str or Path\), but got NoneType$"):
        load_translator(None)                      # was Path()'s message, which named no argument


# --- command line, in process ----------------------------------------------------------------

def run_main(argv, capsys, stdin=None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_one_sentence(ckpt, t, capsys):
    code, out, err = run_main([ckpt, "The dog bites the man."], capsys)
    assert (code, out, err) == (0, t("The dog bites the man.") + "\n", "")
    code, out, _ = run_main([ckpt, "--tokens", "The", "dog", "bites", "the", "man."], capsys)
    assert out == " ".join(reference(t, DOG)) + "\n"


def test_cli_several_quoted_sentences_are_translated_one_per_line(ckpt, t, capsys):
    code, out, err = run_main([ckpt, "The dog bites the man.", "I bought 305000 books."], capsys)
    assert (code, err) == (0, "")
    assert out == t("The dog bites the man.") + "\n" + t("I bought 305000 books.") + "\n"
    code, out, _ = run_main([ckpt, "--tokens", "The dog bites the man.", "the dog runs"], capsys)
    assert out.split("\n")[0] == " ".join(reference(t, DOG))
    code, out, err = run_main([ckpt, "The dog bites the man.", " "], capsys)     # named by place
    assert code == 2 and "sentence 2: empty sentence" in err


def test_cli_stdin_keeps_lines_aligned(ckpt, t, capsys, monkeypatch):
    lines = ["The dog bites the man.", "", "I bought 305000 books.", "dog " * 200, "The xyzzy runs."]
    code, out, err = run_main([ckpt], capsys, "\n".join(lines) + "\n", monkeypatch)
    assert code == 1
    assert out.split("\n")[:-1] == [t(lines[0]), "", t(lines[2]), "", t(lines[4], warn=False)]
    errors = err.strip().split("\n")
    assert errors[0] == f"{PROG}: line 2: empty sentence"
    assert errors[1].startswith(f"{PROG}: line 4: sentence has 201 tokens") and errors[1].endswith("at most 159")
    assert errors[2] == f"{PROG}: 注意：['xyzzy'] 不在词表中，按 <unk> 处理：'The xyzzy runs.'"
    assert len(errors) == 3


def test_cli_stdin_all_good_exits_0(ckpt, t, capsys, monkeypatch):
    code, out, err = run_main([ckpt, "--tokens"], capsys, "The dog bites the man.\nthe dog runs", monkeypatch)
    assert (code, err) == (0, "")
    assert out == t("The dog bites the man.", tokens=True) + "\n" + t("the dog runs", tokens=True) + "\n"


def test_cli_a_dash_reads_stdin_as_other_tools_do(ckpt, t, capsys, monkeypatch):
    code, out, err = run_main([ckpt, "-"], capsys, "The dog bites the man.\nthe dog runs\n", monkeypatch)
    assert (code, err) == (0, "")
    assert out == t("The dog bites the man.") + "\n" + t("the dog runs") + "\n"


def test_cli_at_a_terminal_says_what_it_waits_for(ckpt, t, capsys, monkeypatch):
    # with no sentence it read the terminal silently, which looked like a hang
    class Typed(io.StringIO):
        def isatty(self):
            return True
    monkeypatch.setattr(sys, "stdin", Typed("The dog bites the man.\n"))
    code, out, err = run_main([ckpt], capsys)
    assert (code, out) == (0, t("The dog bites the man.") + "\n")
    assert err == "Type one English sentence per line; Ctrl-D ends.\n"


@pytest.mark.parametrize("argv, message", [
    (["{dir}/missing.pt", "The dog runs."], "does not exist"),
    (["{ckpt}", "--beam", "0", "The dog runs."], "--beam must be a positive integer, but got 0"),
    (["{ckpt}", "--beam", "-3"], "--beam must be a positive integer, but got -3"),
    (["{ckpt}", "I bought 0 books."], "from 1 to 999,999,999"),
    (["{ckpt}", "   "], "empty sentence"),
    (["{ckpt}", "dog " * 170], "sentence has 171 tokens after normalisation; this model accepts at most 159"),
    (["{ckpt}", "--beam", "two"], "invalid int value"),
    (["{ckpt}", "--bogus", "The dog runs."], "unrecognized arguments: --bogus\n"),    # not "--bogus The dog runs."
    (["{ckpt}", "The dog runs.", "--beem=2", "--tokenz"], "unrecognized arguments: --beem=2 --tokenz\n"),
])
def test_cli_errors_are_one_line_exit_2(ckpt, tmp_path, capsys, argv, message):
    code, out, err = run_main([a.format(dir=tmp_path, ckpt=ckpt) for a in argv], capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"{PROG}: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_cli_without_a_checkpoint_asks_for_it_only(capsys):
    # the sentence is optional (stdin is read instead), so the error names the checkpoint alone
    code, out, err = run_main([], capsys)
    assert (code, out) == (2, "")
    assert err == f"{PROG}: error: the following arguments are required: checkpoint\n"


@pytest.mark.parametrize("text, message", [
    (123, "text must be a str or a list of str, but got int"),
    (None, "text must be a str or a list of str, but got NoneType"),
    (["a dog", 5], "text[1] must be a str (one sentence), but got int"),        # was "but got list"
    (("a dog", "the man", None), "text[2] must be a str (one sentence), but got NoneType"),
])
def test_translator_wants_a_str_or_a_list_of_str(t, text, message):
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        t(text)
    assert t(("the dog runs",)) == [t("the dog runs")]


def test_cli_help_has_example(capsys):
    code, out, _ = run_main(["--help"], capsys)
    assert code == 0 and "example" in out and PROG in out and "--beam" in out


def test_python_dash_m_with_beam(ckpt, t):
    want = load_translator(ckpt, beam_size=2, device="cpu")("The dog bites the man.")
    r = subprocess.run([sys.executable, "-m", "tf_tutorial.translate", ckpt, "--beam", "2", "--device", "cpu",
                        "The dog bites the man."], capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stdout, r.stderr) == (0, want + "\n", "")


def test_cli_a_line_that_is_not_utf8_is_that_lines_error_whatever_the_locale(ckpt, t):
    """Python's strict stdin decoding (PYTHONIOENCODING=utf-8:strict, or a locale without
    surrogateescape) ended the whole run with a UnicodeDecodeError traceback."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    r = subprocess.run([sys.executable, "-m", "tf_tutorial.translate", ckpt, "--device", "cpu"],
                       input=b"I love China\xff.\nThe dog bites the man.\n", capture_output=True,
                       env=env, timeout=120)
    assert r.returncode == 1
    assert r.stderr.decode() == (f"{PROG}: line 1: text holds the byte 0xff, which is not UTF-8: "
                                 "save the text as UTF-8\n")
    assert r.stdout.decode().split("\n") == ["", t("The dog bites the man."), ""]


@pytest.mark.parametrize("arguments, expected", [
    (["I", "love", "China."], ["I love China."]),
    (["I love China.", "The dog runs."], ["I love China.", "The dog runs."]),
    (["Hello.", "Goodbye."], ["Hello.", "Goodbye."]),            # quoted one-word sentences
    (["I", "love", "China.", "The", "dog", "runs."], ["I love China.", "The dog runs."]),
    (["Dr.", "Wang", "runs.", "Who", "runs?"], ["Dr. Wang runs.", "Who runs?"]),   # a title ends nothing
    (["the", "dog", "runs"], ["the dog runs"]),                  # no end mark
    (["It", "runs!", "the", "dog"], ["It runs!", "the dog"]),
])
def test_cli_arguments_are_split_into_sentences(arguments, expected):
    assert sentences(arguments) == expected


def test_cli_one_word_quoted_sentences_are_translated_one_per_line(ckpt, t, capsys):
    code, out, err = run_main([ckpt, "--tokens", "Hello.", "Goodbye."], capsys)
    assert code == 0 and "Hello" in err and "Goodbye" in err          # unknown words are noted
    assert out == t("Hello.", tokens=True, warn=False) + "\n" + t("Goodbye.", tokens=True, warn=False) + "\n"


def test_more_sentences_of_one_length_than_a_batch_holds(t):
    """Same-length sentences beyond batch_size go into later batches; each still gets its own output."""
    from tf_tutorial.translate import Translator
    sentences = ["The dog bites the man.", "The man bites the dog.", "I love China.", "He loves China.",
                 "She loves China.", "We love China.", "I bought three books."]
    small = Translator(t.model, t.src_vocab, t.tgt_vocab, batch_size=2)
    rows = [small.encode(s) for s in sentences]
    assert max(sum(len(r) == len(row) for r in rows) for row in rows) > 2    # a length with 3+ sentences
    want = [t(s) for s in sentences]                                         # the default batch holds them all
    assert small(sentences) == want
    assert want == ["".join(reference(t, normalise(s, t.src_vocab))) for s in sentences]


def test_hyphenated_number_words_are_written_as_the_corpus_writes_them(t):
    v = t.src_vocab
    assert normalise("I bought twenty-two books.", v) == normalise("I bought twenty two books.", v)
    assert normalise("Ninety-Nine dogs", v) == normalise("ninety nine dogs", v)
    assert "twenty" in normalise("twenty-two", v) and "twenty-two" not in normalise("twenty-two", v)
    assert normalise("a well-known dog", v)[1] == "well-known"       # only number words are split


def test_after_a_pronoun_s_is_is_not_the_possessive(t):
    # "he's" used to stay he + 's: a known token, so no note, and a sentence shape the corpus never has
    assert normalise("He's happy.", t.src_vocab) == ["he", "is", "happy", "."]
    assert normalise("who's there?", t.src_vocab) == ["who", "is", "there", "?"]
    assert normalise("Rose's book is red.", t.src_vocab)[:2] == ["Rose", "'s"]      # a name's 's stays


def test_cli_a_reader_that_stops_reading_ends_it_quietly(ckpt):
    # ... | head -1 used to print a BrokenPipeError traceback
    import os
    read, write = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "tf_tutorial.translate", ckpt, "--device", "cpu"],
                            stdin=subprocess.PIPE, stdout=write, stderr=subprocess.PIPE, text=True)
    os.close(write)
    os.close(read)                                   # nobody reads the translations
    _, err = proc.communicate("I love China.\n" * 300, timeout=120)
    assert proc.returncode == 141 and "Traceback" not in err and err == ""


def test_cli_ctrl_c_while_reading_stdin_ends_without_a_traceback(ckpt, capsys, monkeypatch):
    class Interrupted(io.StringIO):
        def __iter__(self):
            raise KeyboardInterrupt
    monkeypatch.setattr(sys, "stdin", Interrupted())
    assert main([ckpt, "--device", "cpu"]) == 130
    assert capsys.readouterr().err == "\n"


def test_translator_switches_are_true_or_false(t):
    """tokens="no" was truthy: the tokens came back spaced."""
    with pytest.raises(TypeError, match=r"^tokens must be True or False, but got 'no'$"):
        t("The dog runs.", tokens="no")
    with pytest.raises(TypeError, match=r"^warn must be True or False, but got 0$"):
        t.encode("The dog runs.", warn=0)


def test_normalise_and_tokenize_name_a_text_that_is_not_a_str(t):
    from tf_tutorial.corpus.data import tokenize_en
    for call in (lambda: normalise(5, t.src_vocab), lambda: tokenize_en(5)):   # tokenize_en: "expected string"
        with pytest.raises(TypeError, match=r"^text must be a str \(one sentence\), but got int$"):
            call()
