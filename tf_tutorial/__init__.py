"""《Transformer 的数学原理》的配套软件包。

每个概念一个模块（``rnn``、``attention``、``multihead`` ……），书中每一章都从这里导入代码，
并用 :func:`show` 展示它的真实源码：书里看到的就是被测试过的那一份。
"""
from tf_tutorial.source import show

__version__ = "0.1.0"
__all__ = ["show", "__version__"]
