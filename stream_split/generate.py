"""The test-workload generator moved to ``stream_split.testing.generate``; this name stays
for ``python -m stream_split.generate`` and for code written against it."""
import sys

from stream_split.testing.generate import *  # noqa: F401,F403 - the same public names
from stream_split.testing.generate import __all__, main  # noqa: F401

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
