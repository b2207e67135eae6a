"""Ready-to-run Beam pipelines built on ``stream_split.beam`` (``python -m pipelines.NAME``)."""
