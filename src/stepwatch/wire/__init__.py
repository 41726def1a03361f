"""The batch format on the wire: compact binary columns (SWB v1) and JSON for simple clients."""

from ._binary import CONTENT_TYPE as BINARY_CONTENT_TYPE
from ._binary import VERSION, decode, encode, encode_batch, event_from_dict
from ._errors import WireError
from ._json import CONTENT_TYPE as JSON_CONTENT_TYPE
from ._json import decode_json, json_number, parse_value

__all__ = [
    "BINARY_CONTENT_TYPE",
    "JSON_CONTENT_TYPE",
    "VERSION",
    "WireError",
    "decode",
    "decode_json",
    "encode",
    "encode_batch",
    "event_from_dict",
    "json_number",
    "parse_value",
]
