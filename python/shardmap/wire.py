"""Arrays on the wire: dtypes and headers, and the bytes of RunJob streams.

An array travels as its raw C-order little-endian bytes in ArrayChunk
messages of at most CHUNK_BYTES, never pickled. Chunk messages are
encoded and decoded here by hand (a few bytes of protobuf framing around
the data) so the data is copied once on each side: into the message sent,
and from the message received straight into the output's buffer.
"""
import numpy as np

from shardmap.errors import Internal, InvalidArgument
from shardmap.v1 import common_pb2, coordinator_pb2

CHUNK_BYTES = 1 << 20  # as the C++ client (wire/chunking.h)

_TO_PROTO = {
    np.dtype(np.float32): common_pb2.DTYPE_FLOAT32,
    np.dtype(np.float64): common_pb2.DTYPE_FLOAT64,
    np.dtype(np.int32): common_pb2.DTYPE_INT32,
    np.dtype(np.int64): common_pb2.DTYPE_INT64,
}
_FROM_PROTO = {v: k.newbyteorder("<") for k, v in _TO_PROTO.items()}


def as_wire_array(value, what):
    """`value` as a C-contiguous little-endian array of a wire dtype."""
    arr = np.asarray(value)
    key = arr.dtype.newbyteorder("=")
    if key not in _TO_PROTO:
        raise InvalidArgument(
            f"{what}: dtype {arr.dtype} is not one shardmap moves (float32, "
            f"float64, int32, int64); convert it with .astype(...)")
    want = key.newbyteorder("<")
    if arr.dtype != want or not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr, dtype=want)
    return arr


def header_of(dtype, shape):
    return common_pb2.ArrayHeader(dtype=_TO_PROTO[np.dtype(dtype)],
                                  shape=list(shape))


def dtype_of(header, what):
    try:
        return _FROM_PROTO[header.dtype]
    except KeyError:
        raise Internal(f"{what}: unknown dtype {header.dtype} from the "
                       f"coordinator") from None


def _varint(n):
    """A protobuf base-128 varint: low 7 bits first, high bit = more."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(buf, pos):
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def encode_request(message):
    """Serializer of RunJobRequest: protos, or chunks already encoded."""
    if isinstance(message, bytes):
        return message
    return message.SerializeToString()


def chunk_requests(index, arr):
    """Encoded RunJobRequest{chunk} messages carrying `arr`'s bytes."""
    data = memoryview(arr.reshape(-1).view(np.uint8))
    for offset in range(0, len(data), CHUNK_BYTES):
        piece = data[offset:offset + CHUNK_BYTES]
        # ArrayChunk: index = 1 (varint), offset = 2 (varint), data = 3.
        chunk_head = (b"\x08" + _varint(index) + b"\x10" + _varint(offset) +
                      b"\x1a" + _varint(len(piece)))
        body_len = len(chunk_head) + len(piece)
        # RunJobRequest: chunk = 2 (length-delimited).
        yield b"".join((b"\x12", _varint(body_len), chunk_head, piece))


class Chunk:
    """One received ArrayChunk: its data a view into the message's bytes."""
    __slots__ = ("index", "offset", "data")

    def __init__(self, index, offset, data):
        self.index, self.offset, self.data = index, offset, data


def decode_response(raw):
    """Deserializer of RunJobResponse: a JobResult proto, or a Chunk."""
    if not raw or raw[0] != 0x12:  # not `chunk = 2`: let protobuf parse it
        return coordinator_pb2.RunJobResponse.FromString(raw)
    view = memoryview(raw)
    length, pos = _read_varint(raw, 1)
    end = pos + length
    index = offset = 0
    data = view[0:0]
    while pos < end:
        key, pos = _read_varint(raw, pos)
        field, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, pos = _read_varint(raw, pos)
            if field == 1:
                index = value
            elif field == 2:
                offset = value
        elif wire_type == 2:
            n, pos = _read_varint(raw, pos)
            if field == 3:
                data = view[pos:pos + n]
            pos += n
        else:  # not in ArrayChunk: let protobuf parse (and judge) it
            return coordinator_pb2.RunJobResponse.FromString(raw)
    return Chunk(index, offset, data)


class Receiver:
    """Output arrays filled in place from chunks, in increasing offset."""

    def __init__(self, arrays):
        self.arrays = arrays  # index -> preallocated numpy array or None
        self.views = {i: a.reshape(-1).view(np.uint8)
                      for i, a in arrays.items() if a is not None}
        self.filled = {i: 0 for i in self.views}

    def accept(self, chunk):
        view = self.views.get(chunk.index)
        if view is None:
            raise Internal(f"chunk for output {chunk.index}, which is not "
                           f"returned")
        n = len(chunk.data)
        if chunk.offset != self.filled[chunk.index] or \
                chunk.offset + n > len(view):
            raise Internal(
                f"output {chunk.index}: chunk at byte {chunk.offset} "
                f"({n} bytes) out of order or past the end ({len(view)} bytes, "
                f"{self.filled[chunk.index]} received)")
        view[chunk.offset:chunk.offset + n] = np.frombuffer(chunk.data,
                                                            np.uint8)
        self.filled[chunk.index] += n

    def finish(self):
        for i, view in self.views.items():
            if self.filled[i] != len(view):
                raise Internal(f"output {i}: received {self.filled[i]} of "
                               f"{len(view)} bytes")
