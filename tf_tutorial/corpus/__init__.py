"""第 10 章的玩具英译中语料：离线、由种子决定。

- ``lexicon``：词表（英文词、中文词、量词）；
- ``grammar``：生成句对的文法（``Grammar``），每个英文句子恰好一个中文译法；
- ``data``：词表对象、切分（train/valid/test/longer/deeper）与成批（``make_corpus``、``batches``）。
"""
from tf_tutorial.corpus.data import Corpus, Vocab, batches, make_corpus
from tf_tutorial.corpus.grammar import Grammar

__all__ = ["Corpus", "Grammar", "Vocab", "batches", "make_corpus"]
