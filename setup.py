"""The one compiled part of stream-split: ``stream_split._framing`` (the decoder's framing pass,
``stream_split/_framing.c``). It is optional: where it cannot be built (no C compiler), the
install goes on and the decoder frames with numpy (``decode.Framing``), to the same result.
Everything else about the package is in pyproject.toml."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("stream_split._framing", ["stream_split/_framing.c"],
                             optional=True)])
