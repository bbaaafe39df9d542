"""Errors: one exception class per gRPC status code, all under Error.

Every failure of a call to the cluster raises a subclass of Error carrying
the gRPC code (`.code`, a grpc.StatusCode) and the server's message
(`.message`). Bad input the client refuses before sending anything raises
InvalidArgument, exactly as the coordinator would.
"""
import grpc


class Error(Exception):
    """A failed shardmap call: `.code` (grpc.StatusCode) and `.message`."""

    code = grpc.StatusCode.UNKNOWN

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self):
        return f"{self.code.name}: {self.message}"


class Cancelled(Error):
    code = grpc.StatusCode.CANCELLED


class Unknown(Error):
    code = grpc.StatusCode.UNKNOWN


class InvalidArgument(Error, ValueError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(Error, TimeoutError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(Error):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(Error):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(Error):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(Error):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(Error):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(Error):
    code = grpc.StatusCode.ABORTED


class OutOfRange(Error):
    code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(Error):
    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(Error):
    code = grpc.StatusCode.INTERNAL


class Unavailable(Error):
    code = grpc.StatusCode.UNAVAILABLE


class DataLoss(Error):
    code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(Error):
    code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE = {cls.code: cls for cls in (
    Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound,
    AlreadyExists, PermissionDenied, ResourceExhausted, FailedPrecondition,
    Aborted, OutOfRange, Unimplemented, Internal, Unavailable, DataLoss,
    Unauthenticated)}


def from_code(code, message):
    """The exception for a grpc.StatusCode and a message."""
    return _BY_CODE.get(code, Unknown)(message, code)


def from_rpc_error(err):
    """The exception for a grpc.RpcError raised by a call."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = err.details() if hasattr(err, "details") else str(err)
    return from_code(code, details or code.name.lower())
