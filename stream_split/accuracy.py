"""``python -m stream_split.accuracy``: the accuracy harness, which lives in
``stream_split.testing.accuracy`` (test tooling, not product)."""
import sys

from stream_split.testing.accuracy import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
