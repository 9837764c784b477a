"""The JSON-RPC link with Emacs: pygls' protocol on the sidecar's own stdio loop.

pygls keeps the bookkeeping of requests in both directions (ids, futures,
cancellation); this module gives it plain dicts instead of namedtuples,
orjson instead of `json`, and one table of methods.  It is also the one
place where the params from Emacs are checked against their description
(`protocol.py`) and the sidecar's errors become JSON-RPC errors.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar, cast

from lsprotocol import converters
from lsprotocol.types import ResponseError, ResponseErrorMessage
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcMethodNotFound,
)
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCProtocol,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
)
from pygls.server import JsonRPCServer

from .errors import EmacsUnavailable, LispmError, NotNow
from .protocol import Method
from .stdio import ByteWriter, FrameError, frame

log = logging.getLogger(__name__)

P = TypeVar("P", bound=Mapping[str, Any])
R = TypeVar("R")
Handler = Callable[[Any], Awaitable[Any]]

#: How long the sidecar waits for Emacs by default: Emacs may be collecting
#: garbage or running a long command, but a stalled Emacs must not hang an agent.
EMACS_TIMEOUT = 5.0
#: How long the sidecar waits for the user to decide in Emacs (an approval,
#: a diff) before the agent's call ends with an error.
DECISION_TIMEOUT = 3600.0


class LinkProtocol(JsonRPCProtocol):
    """pygls' JSON-RPC protocol with plain dict payloads and orjson frames."""

    def __init__(self, server: JsonRPCServer, converter: Any) -> None:
        super().__init__(server, converter)
        self.methods: dict[str, Handler] = {}
        self.byte_writer: ByteWriter | None = None

    # pygls looks handlers up by name; ours live in one plain table.
    def _get_handler(self, feature_name: str) -> Handler:
        handler = self.methods.get(feature_name)
        if handler is None:
            raise JsonRpcMethodNotFound.of(feature_name)
        return handler

    def handle_message(self, message: Any) -> None:
        """Dispatch MESSAGE, built by `structure_message`, by its class.

        pygls checks each message against three runtime-checkable Protocols
        (about 7 µs each on Python 3.11); the classes are known here.  It
        also forgets the result type of each answered request only in its
        own `structure_message`, which this class replaces: so here.
        """
        context = contextvars.copy_context()
        if isinstance(message, JsonRPCRequestMessage):
            context.run(self._handle_request, message.id, message.method, message.params)
        elif isinstance(message, JsonRPCNotification):
            context.run(self._handle_notification, message.method, message.params)
        elif isinstance(message, JsonRPCResponseMessage):
            self._result_types.pop(message.id, None)
            context.run(self._handle_response, message.id, message.result)
        else:
            self._result_types.pop(message.id, None)
            context.run(self._handle_response, message.id, None, message.error)

    def forget(self, msg_id: Any) -> None:
        """Drop what is kept for the request MSG_ID, which will not be answered."""
        self._request_futures.pop(msg_id, None)
        self._result_types.pop(msg_id, None)

    def structure_message(self, data: dict[str, Any]) -> Any:
        """Build pygls' message objects from DATA, keeping params as they came."""
        if "method" in data:
            params = data.get("params")
            if "id" in data:
                return JsonRPCRequestMessage(
                    id=data["id"], method=data["method"], jsonrpc=data["jsonrpc"], params=params
                )
            return JsonRPCNotification(
                method=data["method"], jsonrpc=data["jsonrpc"], params=params
            )
        if "error" in data:
            error = data["error"] or {}
            return ResponseErrorMessage(
                id=data.get("id"),
                error=ResponseError(
                    code=int(error.get("code", -32603)),
                    message=str(error.get("message", "")),
                    data=error.get("data"),
                ),
            )
        return JsonRPCResponseMessage(
            id=data["id"], jsonrpc=data["jsonrpc"], result=data.get("result")
        )

    def _send_data(self, data: Any) -> None:
        if self.byte_writer is None or data is None:
            return
        self.byte_writer.write(frame(_plain(data)))

    def send_error(self, msg_id: Any, code: int, message: str) -> None:
        """Answer MSG_ID (None when unknown) with an error."""
        if self.byte_writer is not None:
            self.byte_writer.write(
                frame({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})
            )


def _plain(message: Any) -> dict[str, Any]:
    """Turn one of pygls' message objects into the dict that goes on the wire."""
    if isinstance(message, JsonRPCResponseMessage):
        return {"jsonrpc": "2.0", "id": message.id, "result": message.result}
    if isinstance(message, ResponseErrorMessage) and message.error is not None:
        error: dict[str, Any] = {"code": message.error.code, "message": message.error.message}
        if message.error.data is not None:
            error["data"] = message.error.data
        return {"jsonrpc": "2.0", "id": message.id, "error": error}
    if isinstance(message, JsonRPCRequestMessage):
        return {
            "jsonrpc": "2.0",
            "id": message.id,
            "method": message.method,
            "params": message.params if message.params is not None else {},
        }
    if isinstance(message, JsonRPCNotification):
        return {
            "jsonrpc": "2.0",
            "method": message.method,
            "params": message.params if message.params is not None else {},
        }
    raise TypeError(f"not a JSON-RPC message: {message!r}")


def _at_boundary(method: Method[P, R], handler: Callable[[P], Awaitable[R]]) -> Handler:
    """Wrap HANDLER of METHOD: it gets the params once checked against METHOD,
    and the sidecar's errors reach Emacs as JSON-RPC errors."""

    async def run(params: Any) -> Any:
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise JsonRpcInvalidParams("params must be an object")
        try:
            return await handler(method.check(params))
        except LispmError as err:
            raise JsonRpcException(message=str(err), code=err.code) from err
        except (JsonRpcException, asyncio.CancelledError):
            raise
        except Exception as err:
            log.exception("internal error in a handler")
            raise JsonRpcInternalError(f"internal error: {type(err).__name__}: {err}") from err

    return run


class EmacsLink:
    """Both directions of the link: a method table for Emacs, and calls into Emacs."""

    def __init__(self) -> None:
        self.server = JsonRPCServer(LinkProtocol, converters.get_converter)
        self.protocol: LinkProtocol = self.server.protocol  # type: ignore[assignment]

    def serve(self, method: Method[P, R], handler: Callable[[P], Awaitable[R]]) -> None:
        """Answer METHOD, one Emacs calls, with HANDLER."""
        if method.to != "sidecar":
            raise ValueError(f"{method.name} is answered by Emacs, not the sidecar")
        self.protocol.methods[method.name] = _at_boundary(method, handler)

    def attach(self, writer: ByteWriter) -> None:
        """Send everything from now on to WRITER."""
        self.protocol.byte_writer = writer

    def receive(self, message: Any) -> None:
        """Handle one decoded JSON value from Emacs."""
        if (
            not isinstance(message, dict)
            or message.get("jsonrpc") != "2.0"
            or not ("method" in message or "id" in message)
        ):
            msg_id = message.get("id") if isinstance(message, dict) else None
            self.protocol.send_error(
                msg_id, JsonRpcInvalidRequest.CODE, "not a JSON-RPC 2.0 message"
            )
            return
        if "method" in message and not isinstance(message["method"], str):
            self.protocol.send_error(
                message.get("id"), JsonRpcInvalidRequest.CODE, "method must be a string"
            )
            return
        try:
            self.protocol.handle_message(self.protocol.structure_message(message))
        except Exception:
            # Whatever one message does, the link keeps reading.
            log.exception("could not handle a message from Emacs")
            if "method" in message and "id" in message:
                self.protocol.send_error(message["id"], JsonRpcInternalError.CODE, "internal error")

    def frame_error(self, error: FrameError) -> None:
        """Answer a frame that could not be read."""
        log.warning("bad frame from Emacs: %s", error.message)
        self.protocol.send_error(None, error.code, error.message)

    def notify(self, method: Method[P, None], params: P) -> None:
        """Send Emacs the notification METHOD."""
        self.protocol.notify(method.name, params)

    async def request(self, method: Method[P, R], params: P,
                      within: float = EMACS_TIMEOUT) -> R:
        """Ask Emacs METHOD, a `Method` of `protocol.py`, and return its answer.

        The answer is typed as METHOD's result, as Emacs's handler promises;
        it is not checked.  Raises `EmacsUnavailable` if Emacs answers with
        an error or not within WITHIN seconds.
        """
        name = method.name
        msg_id = str(uuid.uuid4())
        answer = self.protocol.send_request_async(name, params, msg_id=msg_id)
        try:
            return cast(R, await asyncio.wait_for(answer, within))
        except TimeoutError as err:
            # A late answer must find nothing to complete (pygls would raise on it).
            self.protocol.forget(msg_id)
            raise EmacsUnavailable(f"Emacs did not answer {name} within {within:g} s") from err
        except JsonRpcException as err:
            if err.code == NotNow.code:
                raise NotNow(err.message) from err
            raise EmacsUnavailable(f"Emacs failed {name}: {err.message}") from err
