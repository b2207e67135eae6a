"""The one compiled part of stream-split: ``stream_split._native`` (the decoder's framing pass,
``stream_split/_native.c``). It is optional: where it cannot be built (no C compiler), the
install goes on and the decoder frames with numpy (``decode.Framing``), to the same result.
Everything else about the package is in pyproject.toml."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("stream_split._native", ["stream_split/_native.c"],
                             optional=True)])
