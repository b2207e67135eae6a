"""The one compiled part of stream-split: ``stream_split._native`` (``stream_split/_native.c``:
the decoder's framing pass, the manifest's layout, the pieces of tiny iterations, the
detector's op and name folding). It is optional: where it cannot be built (no C compiler),
the install goes on and each caller takes its Python fallback (the decoder frames with numpy,
``decode.Framing``; the detector makes its ops in Python, ``skeleton.PyNode``; the writer
assembles each piece, ``write.PieceWriter._assemble``), to the same result.
Everything else about the package is in pyproject.toml."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("stream_split._native", ["stream_split/_native.c"],
                             optional=True)])
