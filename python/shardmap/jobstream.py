"""One RunJob call: the spec and the arguments' chunks up, the result and
the outputs' chunks down, each output received in place.

Calls from the main thread go over grpc.aio on an event loop of this
module's own, run by the calling thread for the duration of each call:
measured on a loaded 2-core machine, a tiny job then costs half of what
grpc's threaded streams cost, whose every message hops between three
threads. grpc.aio serves one event loop per process well (a second one's
wakeups race for the same socket), so other threads, and a main thread
that already runs an event loop (a Jupyter kernel, say), use the threaded
channel instead.
"""
import asyncio
import sys
import threading
import time

import grpc
import numpy as np

from shardmap import channel as channel_lib
from shardmap import errors, wire
from shardmap.progress import Progress
from shardmap.v1 import coordinator_pb2 as pb

_METHOD = "/shardmap.v1.Coordinator/RunJob"


def _requests(spec, arrays, progress):
    spec.inline_outputs = True  # a small answer comes as one message
    yield pb.RunJobRequest(spec=spec)
    for i, arr in enumerate(arrays):
        if arr is not None and arr.nbytes:
            for message in wire.chunk_requests(i, arr):
                yield message
                if progress:
                    progress.add_sent(len(message))


def _progress(arrays):
    """A Progress when stderr is a terminal (else None: no cost)."""
    isatty = getattr(sys.stderr, "isatty", None)
    if isatty is None or not isatty():
        return None
    return Progress(sum(a.nbytes for a in arrays if a is not None))



def _cancelled(deadline):
    """The error of a job call that ended CANCELLED without this client
    cancelling it: gRPC's server resets a call's stream at its deadline,
    which a client whose own deadline timer has not fired yet reads as
    CANCELLED, so past the deadline it is DeadlineExceeded."""
    if time.monotonic() >= deadline:
        return errors.DeadlineExceeded(
            "the job passed its deadline (its call was cancelled at it)")
    return errors.Cancelled("the job's call was cancelled")

class _Reader:
    """Turns the response messages into (JobResult, outputs)."""

    def __init__(self, progress):
        self.result = None
        self.progress = progress

    def accept(self, message):
        if self.result is None:
            if isinstance(message, wire.Chunk) or \
                    not message.HasField("result"):
                raise errors.Internal(
                    "the coordinator sent chunks before the job result")
            self.result = message.result
            self.outputs, buffers = [], {}
            for i, header in enumerate(self.result.outputs):
                stored = self.result.stored_as
                if i < len(stored) and stored[i]:
                    self.outputs.append(None)  # stays on the workers
                    continue
                arr = np.empty(tuple(header.shape),
                               wire.dtype_of(header, f"output {i}"))
                self.outputs.append(arr)
                buffers[i] = arr
            self.receiver = wire.Receiver(buffers)
            if self.progress:
                self.progress.to_receive = sum(a.nbytes
                                               for a in buffers.values())
            # Small outputs come inside the result (JobSpec.inline_outputs).
            for chunk in self.result.chunks:
                self.receiver.accept(chunk)
                if self.progress:
                    self.progress.add_received(len(chunk.data))
        elif isinstance(message, wire.Chunk):
            self.receiver.accept(message)
            if self.progress:
                self.progress.add_received(len(message.data))
        else:
            raise errors.Internal("unexpected message after the job result")

    def finish(self):
        if self.progress:
            self.progress.done()
        if self.result is None:
            raise errors.Internal("the coordinator sent no job result")
        self.receiver.finish()
        return self.result, self.outputs


_loop = None  # the main thread's event loop for grpc.aio, made on first use


def _aio_loop():
    """The module's event loop if this thread may run it now, else None."""
    global _loop
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        asyncio.get_running_loop()
        return None
    except RuntimeError:
        pass
    if _loop is None:
        _loop = asyncio.new_event_loop()
    return _loop


class JobStreams:
    """RunJob calls to one coordinator. Thread-safe."""

    def __init__(self, address, tls, metadata, sync_channel):
        self._address, self._tls, self._metadata = address, tls, metadata
        self._sync = sync_channel.stream_stream(
            _METHOD, request_serializer=wire.encode_request,
            response_deserializer=wire.decode_response)
        self._aio_channel = self._aio_method = None

    def run(self, spec, arrays, timeout):
        """(JobResult, outputs); grpc.RpcError or shardmap.Error."""
        loop = _aio_loop()
        if loop is None:
            return self._run_sync(spec, arrays, timeout)
        if self._aio_method is None:
            async def make():
                return channel_lib.make_channel(self._address, self._tls,
                                                aio=True)
            self._aio_channel = loop.run_until_complete(make())
            self._aio_method = self._aio_channel.stream_stream(
                _METHOD, request_serializer=wire.encode_request,
                response_deserializer=wire.decode_response)
        task = loop.create_task(
            self._run_aio(self._aio_method, spec, arrays, timeout))
        try:
            return loop.run_until_complete(task)
        except BaseException:
            # Ctrl-C, say: cancel the call, or it resumes with the next one.
            if not task.done():
                task.cancel()
                try:
                    loop.run_until_complete(task)
                except BaseException:
                    pass
            raise

    async def _run_aio(self, method, spec, arrays, timeout):
        deadline = time.monotonic() + timeout
        reader = _Reader(_progress(arrays))
        call = method(_requests(spec, arrays, reader.progress),
                      timeout=timeout, metadata=self._metadata)
        try:
            async for message in call:
                reader.accept(message)
            return reader.finish()
        except errors.Error:
            call.cancel()
            raise
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # this task is being cancelled (Ctrl-C, say)
            # grpc.aio raises CancelledError for a call that ended
            # CANCELLED.
            raise _cancelled(deadline) from None

    def _run_sync(self, spec, arrays, timeout):
        deadline = time.monotonic() + timeout
        reader = _Reader(_progress(arrays))
        call = self._sync(_requests(spec, arrays, reader.progress),
                          timeout=timeout, metadata=self._metadata)
        try:
            for message in call:
                reader.accept(message)
            return reader.finish()
        except errors.Error:
            call.cancel()
            raise
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.CANCELLED:
                raise _cancelled(deadline) from None
            raise

    def close(self):
        """Closes the grpc.aio channel (from the main thread, when no
        event loop runs there; otherwise it closes with the process)."""
        if self._aio_channel is not None and _aio_loop() is not None:
            _loop.run_until_complete(self._aio_channel.close())
            self._aio_channel = self._aio_method = None
