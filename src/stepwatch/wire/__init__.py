"""The batch format on the wire: compact binary columns (SWB v1) and JSON for simple clients;
how batches travel through a broker."""

from ._binary import CONTENT_TYPE as BINARY_CONTENT_TYPE
from ._binary import VERSION, decode, encode, encode_batch, event_from_dict
from ._broker import (
    BROKER_SCHEMES,
    FLEET_EXCHANGE,
    HEADER_PATH,
    HEADER_SOURCE,
    HEADER_TOKEN,
    RUNS_PATH,
    STREAM_PREFIX,
    Route,
    is_broker_url,
    partition_of,
    partition_stream,
    routing_key,
)
from ._errors import WireError
from ._json import CONTENT_TYPE as JSON_CONTENT_TYPE
from ._json import decode_json, json_number, parse_value

__all__ = [
    "BROKER_SCHEMES",
    "FLEET_EXCHANGE",
    "HEADER_PATH",
    "HEADER_SOURCE",
    "HEADER_TOKEN",
    "RUNS_PATH",
    "STREAM_PREFIX",
    "Route",
    "BINARY_CONTENT_TYPE",
    "JSON_CONTENT_TYPE",
    "VERSION",
    "WireError",
    "decode",
    "decode_json",
    "encode",
    "encode_batch",
    "event_from_dict",
    "is_broker_url",
    "json_number",
    "parse_value",
    "partition_of",
    "partition_stream",
    "routing_key",
]
