"""A connection's request headers must arrive within ``--read-timeout`` seconds, as its body must (front.read_body).

uvicorn (0.55) has no such limit: a client that connected and sent nothing, or part of its headers a byte at a time,
held its connection and a file descriptor for ever (an audit held them for hours), so a few hundred idle sockets
could use up the server's descriptors. The body's limit (front.py) cannot see them: the app is only called once the
headers are complete. So the HTTP process's protocol (uvicorn's own, httptools' or h11's) is given a deadline from
the moment a connection opens, and again from each answer on a kept-alive connection, until the next request's
headers are complete. A client that sent part of its headers gets a 408 in the server's JSON shape and one log line;
one that sent nothing is closed without either (a browser's preconnected socket, a load balancer's TCP check: uvicorn's
keep-alive timeout closes a kept-alive idle one earlier the same way).
"""

from __future__ import annotations

import asyncio
import json

from attention_serve.front import SECURITY_HEADERS, WHOLE_BODY, log


def answer_408(timeout: float) -> bytes:
    """The whole HTTP/1.1 response a client whose headers were late gets, connection closed after it."""
    body = json.dumps({"error": f"the request's headers did not arrive within {timeout:g} s", "status": 408}).encode()
    head = [b"HTTP/1.1 408 Request Timeout", b"content-type: application/json",
            b"content-length: " + str(len(body)).encode(), b"connection: close",
            *(name + b": " + value for name, value in SECURITY_HEADERS)]  # fmt: skip
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def protocol(timeout: float, http: str = "auto") -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class (the one ``http="auto"`` picks) with the header deadline of ``timeout`` seconds:
    given to uvicorn as ``http=``. Built in the main process; the HTTP process is forked with it."""
    from uvicorn.config import HTTP_PROTOCOLS
    from uvicorn.importer import import_from_string

    base = import_from_string(HTTP_PROTOCOLS[http])

    class HeaderDeadline(base):
        # both of uvicorn's protocols keep the request being answered in ``cycle``: a new one once headers are complete
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._deadline = None
            self._arm()

        def _arm(self) -> None:
            self._sent = False  # whether part of the next request's headers came
            self._seen = getattr(self, "cycle", None)
            self._deadline = self.loop.call_later(timeout, self._late)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def data_received(self, data: bytes) -> None:
            if self._deadline is not None:
                if self._body_arriving():  # the answered request's body, still coming (a 401 before the upload's
                    # end): not the next headers; the deadline runs again from this chunk, within WHOLE_BODY x
                    # timeout of the answer in all (a byte every second held the socket for ever: review)
                    self._disarm()
                    if self.loop.time() - self._answered > WHOLE_BODY * timeout:
                        self.transport.close()
                        return
                    self._deadline = self.loop.call_later(timeout, self._late)
                else:
                    self._sent = self._sent or bool(data)
            super().data_received(data)
            if self._deadline is not None and getattr(self, "cycle", None) is not self._seen:
                self._disarm()  # the headers are complete: the body's own limit takes over (front.read_body)

        def on_response_complete(self) -> None:
            self._answered = self.loop.time()
            super().on_response_complete()
            if not self.transport.is_closing():
                self._disarm()
                self._arm()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _body_arriving(self) -> bool:
            """Whether the request last answered is still sending its body (it was answered before reading it all:
            a refusal); its bytes were counted as the next request's headers, and a 408 cut the upload off."""
            cycle = getattr(self, "cycle", None)
            return cycle is not None and cycle is self._seen and bool(getattr(cycle, "more_body", False))

        def _late(self) -> None:
            self._deadline = None
            cycle = getattr(self, "cycle", None)
            if self.transport.is_closing() or (cycle is not None and not cycle.response_complete):
                return  # a request is being answered (a pipelined one started after the last answer)
            if self._body_arriving():  # an answered request's body that stopped coming: nothing to answer
                self.transport.close()
                return
            if self._sent:
                client = (self.client or ("a client",))[0]
                log(f"408 from {client}: the request's headers did not arrive within {timeout:g} s (--read-timeout)")
                self.transport.write(answer_408(timeout))
            self.transport.close()

    return HeaderDeadline
