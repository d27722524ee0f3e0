"""写书用的工具，不讲 Transformer 本身。

- ``source``：``show(...)``，在书中展示软件包的真实源码；
- ``notebook``：``check``（构建时验证论断）、``glue``（把算出的数字放进正文）；
- ``plotting``：全书统一的图风格和中文字体；
- ``records``：读取 ``book/records/`` 里提交的测量记录。
"""
