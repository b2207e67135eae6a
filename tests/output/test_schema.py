"""Protobuf schema: records and manifests convert, and the generated code is current."""
from __future__ import annotations

import importlib.util
import io
import os
import re
import subprocess
import sys

import pytest
from google.protobuf import json_format

from stream_split import schema
from stream_split.core.records import NESTED_FIELDS, Boundary, IterationRecord, iteration_fields

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO = os.path.join(ROOT, "proto", "stream_split", "v1", "records.proto")

BOUNDARY = Boundary(3, 1234.5, "17", "17", "ProfilerStep#3")
ITERATION = IterationRecord(3, start_ts=1234.5, end_ts=2234.75, first_op="ProfilerStep#3",
                            events=120, cpu_ops=40, launches=20, kernels=18, gpu_events=20,
                            gpu_busy_us=812.1234, gpu_start_ts=1300.0, gpu_end_ts=2200.0,
                            file="iteration_00003.json.gz")


def as_dict(message) -> dict:
    """The fields of ``message`` that are set (proto3 scalars always are)."""
    return {f.name: getattr(message, f.name) for f in message.DESCRIPTOR.fields
            if not f.has_presence or message.HasField(f.name)}


def round_trip(records) -> list:
    data = b"".join(schema.length_prefixed(schema.record_message(r, trace="t.json"))
                    for r in records)
    return list(schema.read_length_prefixed(io.BytesIO(data)))


@pytest.fixture(params=["proto", "fallback"])
def framing(request, monkeypatch):
    """Run with protobuf's length-prefix helpers and with the fallback for older protobuf."""
    if request.param == "fallback":
        monkeypatch.setattr(schema, "_serialize_length_prefixed", None)
        monkeypatch.setattr(schema, "_parse_length_prefixed", None)
    return request.param


def test_records_round_trip_length_prefixed(framing):
    idle = IterationRecord(4, kind="idle", start_ts=2234.75, end_ts=2300.0, complete=False)
    boundary, iteration, idle_message = round_trip([BOUNDARY, ITERATION, idle])
    assert all(m.trace == "t.json" for m in (boundary, iteration, idle_message))
    assert boundary.WhichOneof("body") == "boundary"
    assert as_dict(boundary.boundary) == {k: v for k, v in BOUNDARY.to_dict().items()
                                          if k != "type"}
    for message, record in ((iteration, ITERATION), (idle_message, idle)):
        assert message.WhichOneof("body") == "iteration"
        expected = {k: v for k, v in record.to_dict().items() if k != "type" and v is not None}
        assert as_dict(message.iteration) == pytest.approx(expected)
    assert not idle_message.iteration.HasField("gpu_start_ts")


def test_iteration_fields_match_to_dict():
    fields = {f.name for f in schema.pb.Iteration.DESCRIPTOR.fields}
    assert fields == set(ITERATION.to_dict()) - {"type"}


def test_iteration_fields_are_the_scalar_keys_of_to_dict_in_order():
    assert [name for name, _, _ in iteration_fields()] == [
        key for key in ITERATION.to_dict() if key not in NESTED_FIELDS]


def test_iteration_fields_match_the_iteration_message_of_records_proto():
    # Read from the .proto text itself, not the generated code: the schema's source.
    with open(PROTO, encoding="utf-8") as f:
        body = re.search(r"^message Iteration \{(.*?)^\}", f.read(), re.M | re.S).group(1)
    declared = {name: (kind, bool(optional)) for optional, kind, name in re.findall(
        r"^\s*(optional )?(\w+) (\w+) = \d+;", body, re.M)}
    assert declared.pop("breakdown") == ("Breakdown", False)  # a message: no column
    proto_type = {int: "int64", float: "double", str: "string", bool: "bool"}
    derived = {name: (proto_type[kind], nullable)
               for name, kind, nullable in iteration_fields() if name != "type"}
    assert derived == declared


def test_truncated_stream_is_an_error(framing):
    data = schema.length_prefixed(schema.record_message(ITERATION))
    with pytest.raises(Exception):
        list(schema.read_length_prefixed(io.BytesIO(data[:-3])))


def test_summary_message():
    summary = {"trace": "t.json", "iterations": 10, "idle": 1, "median_iteration_us": 1000.5,
               "p90_iteration_us": 1200.0, "gpu_busy_share": 0.8, "complete": True,
               "error": None, "events_in": 5000, "events_out": 4990}
    message = schema.summary_message(summary)
    assert message.trace == "t.json" and message.WhichOneof("body") == "summary"
    assert as_dict(message.summary) == {**summary, "error": ""}


def test_manifest_converts():
    iteration = {k: v for k, v in ITERATION.to_dict().items() if k != "type"}
    manifest = {
        "format": "stream-split/manifest", "version": 1, "input": "t.json",
        "complete": True, "stop_reason": None, "form": "object", "bytes_read": 123456,
        "detection": {"detector": "steps", "loop_thread": [17, "17"], "instances": 1,
                      "confidence": 1.0, "unit": ("ProfilerStep#N",)},
        "counts": {"events_in": 130, "metadata_events": 4, "non_metadata_in": 126,
                   "events_in_iterations": 120, "events_outside": 6, "events_out": 126,
                   "conserved": True, "metadata_copied_per_piece": 4},
        "iterations": [iteration, {**iteration, "index": 4, "file": None,
                                   "gpu_start_ts": None, "gpu_end_ts": None}],
        "outside": {"file": "outside.json.gz", "events": 6, "kernels": 0},
    }
    message = schema.manifest_message(manifest)
    assert schema.Manifest.FromString(message.SerializeToString()) == message
    assert message.format == "stream-split/manifest" and message.version == 1
    assert message.stop_reason == "" and message.bytes_read == 123456
    assert as_dict(message.counts) == manifest["counts"]
    assert as_dict(message.outside) == manifest["outside"]
    assert json_format.MessageToDict(message.detection) == {
        **manifest["detection"], "unit": ["ProfilerStep#N"]}
    assert as_dict(message.iterations[0]) == pytest.approx(
        {k: v for k, v in iteration.items() if v is not None})  # None leaves a field unset
    assert message.iterations[1].file == ""
    assert not message.iterations[1].HasField("gpu_end_ts")
    assert not schema.manifest_message({"input": "x"}).HasField("bytes_read")


def test_proto_package():
    with open(PROTO, encoding="utf-8") as f:
        text = f.read()
    assert re.search(r"^package stream_split\.v1;$", text, re.M)
    assert schema.Record.DESCRIPTOR.full_name == "stream_split.v1.Record"


@pytest.mark.skipif(importlib.util.find_spec("grpc_tools") is None,
                    reason="needs grpcio-tools (the [dev] extra)")
def test_generated_code_is_current():
    result = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen_proto.py"),
                             "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_gen_proto_refuses_new_grpcio_tools(monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "gen_proto", os.path.join(ROOT, "scripts", "gen_proto.py"))
    gen_proto = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_proto)
    monkeypatch.setattr(gen_proto, "tools_version", lambda: (1, 82))
    with pytest.raises(SystemExit, match="too new"):
        gen_proto.main(["--check"])


def test_breakdown_round_trips_through_the_iteration_message():
    breakdown = {"span_us": 900.0, "compute_us": 700.0, "comm_us": 100.0, "memcpy_us": 50.0,
                 "memset_us": 0.0, "idle_us": 50.0,
                 "top_kernels": [{"name": "gemm", "count": 3, "total_us": 600.0}],
                 "host": {"cpu_op_us": 400.0, "launch_delay_mean_us": 12.5,
                          "launch_delay_max_us": 30.0, "launches_timed": 3},
                 "comm_kernels": 2, "comm_kernel_us": 150.0}
    record = IterationRecord(3, start_ts=0.0, end_ts=1000.0, breakdown=breakdown)
    (message,) = round_trip([record])
    assert json_format.MessageToDict(message.iteration.breakdown,
                                     preserving_proto_field_name=True,
                                     always_print_fields_with_no_presence=True) == {
        **breakdown, "top_kernels": [{"name": "gemm", "count": "3", "total_us": 600.0}],
        "host": {**breakdown["host"], "launches_timed": "3"}, "comm_kernels": "2"}
