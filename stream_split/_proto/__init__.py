"""Generated protobuf code (``python scripts/gen_proto.py``); do not edit."""
