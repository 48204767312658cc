"""One keep-alive ``httpx.AsyncClient`` per REST backend, every failure mapped once.

Imported on a backend's first call, never at start-up. What a backend can do to the gateway is
bounded here: answers are read as a stream and refused past ``max_response_bytes``, counted
after decoding at every ``Content-Encoding`` layer (see :mod:`gateway.rest.body`), and past
``max_response_values`` JSON values, counted before parsing; a large answer is parsed in a worker
thread, so the tool's timeout still holds. A redirect is never followed for a change (POST, PUT,
PATCH, DELETE) and for a read only within the backend's own origin, at most five times; one that
is not followed is a ``BACKEND_ERROR`` naming where it pointed. Requests in flight are capped by
``max_concurrency``, and only GETs are retried, only when the connection was refused or dropped
before an answer, twice at most, with a short backoff.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import anyio
import anyio.to_thread
import httpx

from ..errors import ErrorCode, Failure, GatewayError, Sanitizer, StatusRule, status_error
from ..pipeline import note_cancelled_waiting
from ..telemetry import current
from ..tls import tls_context
from .body import (
    ACCEPT_ENCODING,
    BoundedDecoder,
    DecodingFailed,
    TooDeep,
    TooManyValues,
    backend_reason,
    decode_json,
)
from .settings import RestSettings

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_RETRY_BACKOFF = (0.1, 0.3)
MAX_REDIRECTS = 5
#: Answers larger than this are parsed (and validated) in a worker thread.
LARGE_ANSWER_BYTES = 256 * 1024


@dataclass(frozen=True)
class Answer:
    """A decoded answer: the JSON ``data``, the status, the headers and the body's size in
    bytes (after decoding)."""

    data: Any
    status: int
    headers: httpx.Headers
    size: int = 0

    @property
    def large(self) -> bool:
        """Worth validating off the event loop."""
        return self.size > LARGE_ANSWER_BYTES


def fill_path(template: str, values: Mapping[str, Any]) -> str:
    """Put each value into its ``{placeholder}``, percent-encoded as one segment (``/`` too)."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values or values[name] is None:
            raise KeyError(f"no value for path parameter {name!r}")
        return quote(str(values[name]), safe="")

    return _PLACEHOLDER.sub(one, template)


class RestClient:
    """The shared client of one backend, opened by :meth:`gateway.rest.RestBackend.open_client`
    with what the declaration says; handlers reach it as ``ctx.client`` (see
    :class:`gateway.rest.RestContext`). ``headers``: the backend's own (user agent,
    credentials), sent with every request."""

    def __init__(
        self,
        settings: RestSettings,
        sanitizer: Sanitizer | None = None,
        *,
        name: str,
        title: str,
        headers: Mapping[str, str],
        api_prefix: str = "",
        down_message: str | None = None,
    ) -> None:
        assert settings.url is not None
        sent = {"Accept": "application/json", "Accept-Encoding": ACCEPT_ENCODING}
        sent.update(headers)
        self.name = name
        self.api_prefix = api_prefix
        self.down_message = down_message
        self.settings = settings
        self.title = title
        self.cap = settings.max_response_bytes
        self.max_values = settings.max_response_values
        self.sanitizer = sanitizer if sanitizer is not None else Sanitizer()
        self.origin = _origin(httpx.URL(settings.url))
        self.http = httpx.AsyncClient(
            base_url=settings.url + api_prefix,
            headers=sent,
            timeout=httpx.Timeout(settings.request_timeout),
            limits=httpx.Limits(
                max_connections=settings.max_concurrency,
                max_keepalive_connections=settings.max_concurrency,
            ),
            follow_redirects=False,  # followed here, within the origin, for reads only
            verify=tls_context(settings.verify_tls),
        )
        self.limiter = anyio.CapacityLimiter(settings.max_concurrency)
        self._hint = (
            f"set a valid {settings.env_name('TOKEN')}"
            if settings.env_prefix
            else "check the backend's credentials"
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    # --- the one place transport failures are mapped -------------------------------------------

    def _down(self, what: str) -> GatewayError:
        return GatewayError(
            ErrorCode.BACKEND_UNAVAILABLE,
            self.down_message
            or f"{self.title} is unreachable (connection refused or dropped) while asking for "
            f"{what}; check that it runs at {self.settings.url}, then retry",
            backend_down=True,
        )

    def _slow(self, what: str) -> GatewayError:
        return GatewayError(
            ErrorCode.TIMEOUT,
            f"{self.title} did not answer within {self.settings.request_timeout:g} s for {what}; "
            "retry later, or ask for less",
            backend_down=True,
        )

    def _malformed(self, what: str, exc: BaseException) -> GatewayError:
        detail = str(exc) if isinstance(exc, DecodingFailed) else type(exc).__name__
        return GatewayError(
            ErrorCode.BACKEND_ERROR,
            f"{self.title} sent a malformed response for {what} ({detail}); retry later",
        )

    def _not_followed(self, resp: httpx.Response, what: str) -> httpx.Request:
        """The request a redirect points to, if it is followed: a read within the origin."""
        target = resp.next_request
        assert target is not None  # has_redirect_location, and redirects are not followed
        where = _origin(target.url)
        url_setting = self.settings.env_name("URL")
        if resp.request.method not in ("GET", "HEAD"):
            raise GatewayError(
                ErrorCode.BACKEND_ERROR,
                f"{self.title} answered {what} with a redirect (HTTP {resp.status_code}) to "
                f"{where}, and a change is never sent on: check that {url_setting} is the "
                "API's own address, and whether the change was made, before retrying",
                retryable=False,
            )
        if where != self.origin:
            raise GatewayError(
                ErrorCode.BACKEND_ERROR,
                f"{self.title} redirected {what} to another origin ({where}), which is not "
                f"followed: check that {url_setting} is the API's own address",
                retryable=False,
            )
        return target

    def failure(
        self,
        status: int,
        body: Any,
        what: str,
        rules: Mapping[int, StatusRule] | None,
        values: Mapping[str, Any] | None = None,
    ) -> BaseException:
        """The exception for an answer with a status of 300 or more."""
        failure = Failure(
            status,
            backend_reason(body, self.sanitizer),
            what,
            self.title,
            credentials_hint=self._hint,
            values=dict(values or {}),
        )
        return status_error(failure, rules)

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
        what: str = "this request",
        route: str | None = None,
    ) -> AsyncIterator[httpx.Response]:
        """An open response whose body is not read yet (for files), transport failures mapped.

        The caller reads the body and checks the status itself; see :meth:`read_capped` and
        :meth:`failure`. ``route`` is the path's template (``/api/jobs/{job_id}``), which
        telemetry records; a filled path never is.
        """
        kwargs: dict[str, Any] = {"params": _clean(params), "headers": headers}
        if json_body is not None:
            kwargs["json"] = json_body
        attempts = len(_RETRY_BACKOFF) + 1 if method == "GET" else 1
        try:
            async with self.limiter:
                with current().backend_request(
                    self.name,
                    method,
                    None if route is None else self.api_prefix + route,
                    url=self.settings.url,
                ) as trace:
                    resp = await self._send(method, path, kwargs, attempts, what)
                    trace.status(resp.status_code)
                    try:
                        yield resp
                    finally:
                        await resp.aclose()
        except anyio.get_cancelled_exc_class():
            # Cut off (by the tool's timeout) while waiting for this backend: its failure.
            note_cancelled_waiting(self.name)
            raise

    async def _send(
        self, method: str, path: str, kwargs: dict[str, Any], attempts: int, what: str
    ) -> httpx.Response:
        try:
            request = self.http.build_request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise self._malformed(what, exc) from None
        for _ in range(MAX_REDIRECTS + 1):
            resp = await self._send_once(request, attempts, what)
            if not resp.has_redirect_location:
                return resp
            await resp.aclose()
            request = self._not_followed(resp, what)
        raise GatewayError(
            ErrorCode.BACKEND_ERROR,
            f"{self.title} redirected {what} more than {MAX_REDIRECTS} times; not followed further",
            retryable=False,
        )

    async def _send_once(self, request: httpx.Request, attempts: int, what: str) -> httpx.Response:
        for attempt in range(attempts):
            try:
                return await self.http.send(request, stream=True)
            except (httpx.ConnectError, httpx.RemoteProtocolError) as exc:
                # Refused, or a kept-alive connection the server had closed before answering:
                # nothing was answered, so an idempotent GET may be sent again.
                if attempt + 1 >= attempts or _answered(exc):
                    if isinstance(exc, httpx.ConnectError):
                        raise self._down(what) from None
                    raise self._malformed(what, exc) from None
                await anyio.sleep(_RETRY_BACKOFF[attempt])
            except httpx.ConnectTimeout:
                raise self._down(what) from None
            except httpx.TimeoutException:
                raise self._slow(what) from None
            except httpx.NetworkError:
                raise self._down(what) from None
            except httpx.HTTPError as exc:
                raise self._malformed(what, exc) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def read_capped(self, resp: httpx.Response, what: str) -> bytes:
        """The whole (decompressed) body, refused past the backend's ``max_response_bytes``."""
        declared = resp.headers.get("Content-Length", "")
        encoded = "Content-Encoding" in resp.headers
        if declared.isdigit() and int(declared) > self.cap and not encoded:
            raise self._too_large(what)
        data, complete = await self.read_prefix(resp, self.cap, what)
        if not complete:
            raise self._too_large(what)
        return data

    async def read_prefix(self, resp: httpx.Response, limit: int, what: str) -> tuple[bytes, bool]:
        """At most ``limit`` bytes of the decoded body, and whether that was all of it; the
        rest is not read (for files, where a prefix is a useful answer). No ``Content-Encoding``
        layer ever holds more than a small step beyond what was asked for."""
        chunks: list[bytes] = []
        got = 0
        complete = True
        try:
            decoder = BoundedDecoder(resp.headers.get_list("Content-Encoding", split_commas=True))
            async for raw in resp.aiter_raw():
                for chunk in decoder.feed(raw):
                    chunks.append(chunk)
                    got += len(chunk)
                    if got > limit:
                        complete = False
                        break
                if not complete:
                    break
            if complete:
                decoder.finish()
        except httpx.TimeoutException:
            raise self._slow(what) from None
        except (httpx.HTTPError, DecodingFailed) as exc:
            raise self._malformed(what, exc) from None
        return b"".join(chunks)[:limit], complete

    def _too_large(self, what: str) -> GatewayError:
        return GatewayError(
            ErrorCode.BACKEND_ERROR,
            f"{self.title}'s answer for {what} is larger than {self.cap:,} bytes "
            f"({self.settings.env_name('MAX_RESPONSE_BYTES')}); ask for less",
            retryable=False,
        )

    # --- JSON requests ---------------------------------------------------------------------------

    async def answer(
        self,
        method: str,
        path: str,
        *,
        path_params: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        status: Mapping[int, StatusRule] | None = None,
        what: str = "this request",
        allow_null: bool = False,
        values: Mapping[str, Any] | None = None,
    ) -> Answer:
        """Send one request and return its decoded JSON with the status and headers; every
        failure is a ``GatewayError``.

        ``path`` may hold ``{placeholders}`` filled from ``path_params`` (each value
        percent-encoded as one segment); given ``path_params`` (even ``{}``), ``path`` is a
        template and telemetry records it. ``params`` with value ``None`` are left out;
        ``json_body=None`` sends no body. ``status`` overrides the answer for given statuses
        (see :data:`StatusRule`); its templates are filled from ``values``, by default the
        fields of a JSON object body, the query parameters and the path parameters;
        ``allow_null`` accepts an empty (``null``) answer.
        """
        if values is None:
            body_fields = json_body if isinstance(json_body, Mapping) else {}
            values = {**body_fields, **(params or {}), **(path_params or {})}
        url = fill_path(path, path_params or {}) if "{" in path else path
        route = path if path_params is not None else None
        async with self.stream(
            method, url, params=params, json_body=json_body, what=what, route=route
        ) as resp:
            body = await self.read_capped(resp, what)
            code, headers = resp.status_code, resp.headers
        if code >= 300:
            raise self.failure(code, body, what, status, values)
        data = await self._decode(body, what)
        if data is None and not allow_null:
            raise GatewayError(
                ErrorCode.BACKEND_ERROR,
                f"{self.title} sent an empty (null) answer for {what}; retry later",
            )
        return Answer(data, code, headers, len(body))

    async def _decode(self, body: bytes, what: str) -> Any:
        if not body:
            return None
        try:
            if len(body) <= LARGE_ANSWER_BYTES:
                return decode_json(body, self.max_values)
            return await anyio.to_thread.run_sync(
                decode_json, body, self.max_values, abandon_on_cancel=True
            )
        except TooManyValues:
            raise GatewayError(
                ErrorCode.BACKEND_ERROR,
                f"{self.title}'s answer for {what} holds more than {self.max_values:,} JSON "
                f"values ({self.settings.env_name('MAX_RESPONSE_VALUES')}); ask for less",
                retryable=False,
            ) from None
        except TooDeep:
            raise GatewayError(
                ErrorCode.BACKEND_ERROR,
                f"{self.title}'s answer for {what} is nested too deeply to be read",
                retryable=False,
            ) from None
        except ValueError:
            raise GatewayError(
                ErrorCode.BACKEND_ERROR,
                f"{self.title}'s answer for {what} is not JSON; is "
                f"{self.settings.env_name('URL')} the API's base URL?",
            ) from None


def _clean(params: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not params:
        return None
    out: dict[str, Any] = {}
    for key, value in params.items():
        if value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else value
    return out


def _origin(url: httpx.URL) -> str:
    """``scheme://host[:port]``: where a URL points, without credentials, path or query."""
    host = f"[{url.host}]" if ":" in url.host else url.host
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{host}{port}"


def _answered(exc: httpx.HTTPError) -> bool:
    """A protocol error after the server started answering is not a dropped connection."""
    return isinstance(exc, httpx.RemoteProtocolError) and "without sending" not in str(exc)
