"""The one compiled part of stream-split: ``stream_split._native`` (the decoder's framing pass
and the detector's op, ``stream_split/_native.c``). It is optional: where it cannot be built
(no C compiler), the install goes on, the decoder frames with numpy (``decode.Framing``) and
the detector makes its ops in Python (``skeleton.PyNode``), to the same result.
Everything else about the package is in pyproject.toml."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("stream_split._native", ["stream_split/_native.c"],
                             optional=True)])
