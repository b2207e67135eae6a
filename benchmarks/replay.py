#!/usr/bin/env python3
"""Replay generated loops live into ``stream-split boundaries`` (a pipe, a growing file) and
report per scenario the share of boundaries out on time and their lag; see
``stream_split.testing.replay``.

    python benchmarks/replay.py [--mode pipe follow] [--timeout 1] [--markdown]
"""
import sys

from stream_split.testing.replay import main

if __name__ == "__main__":
    sys.exit(main())
