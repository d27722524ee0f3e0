"""《Transformer 的数学原理》的配套软件包。

顶层的模块就是书的目录，每章一个（或几个）：

=============  ==========================================
``rnn``        第 1 章  RNN 的局限
``embedding``  第 2 章  词向量与位置编码
``attention``  第 3 章  自注意力
``multihead``  第 4 章  多头注意力
``norm``       第 5 章  层归一化
``residual``   第 6 章  残差连接
``ffn``        第 7 章  前馈网络
``encoder``    第 8 章  编码器
``decoder``    第 9 章  解码器
``model``      第 10 章 完整模型；``train``、``decode``、``metrics``、
               ``translate`` 同属第 10 章
``gpt``        第 11 章 续篇：只用解码器的模型与采样
``rope``       第 12 章 续篇：旋转位置编码（RMSNorm、GQA 在 ``norm``、
               ``multihead`` 里）
``flash``      第 12 章 续篇：FlashAttention 的分块算法
``interop``    与 ``torch.nn`` 互换权重（第 3–10 章用它验证本书的实现）
=============  ==========================================

子包按用途划分：``experiments``（各章的小实验）、
``corpus``（第 10 章的玩具语料）、``timing``（与 ``torch.nn`` 并排计时）、
``book``（画图、``check``/``glue``、``show``、测量记录）。
书中每一章都从这里导入代码，并用 :func:`show` 展示它的真实源码：
书里看到的就是被测试过的那一份。
"""
import importlib
import importlib.util

if importlib.util.find_spec("torch") is None:   # e.g. the system Python
    raise ModuleNotFoundError(
        "tf_tutorial needs PyTorch, which this Python does not have: use the "
        "environment the README creates (.venv/bin/python, or run "
        "'source .venv/bin/activate' first)", name="torch")

from tf_tutorial.book.source import show  # noqa: E402

__version__ = "0.1.0"
__all__ = ["show", "__version__"]


def __getattr__(name: str):
    """``import tf_tutorial`` 之后也能写 ``tf_tutorial.attention``：用到时才导入。

    Submodules load on first use (PEP 562), so ``import tf_tutorial`` stays
    light and ``tf_tutorial.attention.causal_mask`` still works.
    """
    if not name.startswith("_"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":   # a real module's own import
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
