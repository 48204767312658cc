"""A stand-in for the Anthropic Messages API that plays the model for Claude Code.

A real HTTP server on 127.0.0.1 (a thread). Claude Code 2.1 sends ``HEAD /`` as a
connectivity check, then ``POST /v1/messages?beta=true`` with ``"stream": true`` for every
turn of the main conversation. Each answer follows a per-prompt script (:meth:`StandInModel.reset`
before each prompt): the n-th turn after the prompt (n = the assistant messages since it)
plays the n-th step, a tool call or a text; past the script it says ``done``. A conversation
may go on with further prompts (a stream-json session): what came before the latest prompt is
history, not part of its script. A call's arguments may be a function of what the model has
seen since the prompt (:class:`Seen`: the user's text, the earlier results), as a model picks
an id out of a previous answer. Every request is recorded, so a test can read
what Claude Code offered the model (tools and schemas, system prompt) and what it sent back
(tool results, the rendered prompt of a slash command).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Seen:
    """What the model has read since the latest prompt: the user's text and, per tool (its
    full name), the text of each result in order."""

    text: str
    results: dict[str, list[str]]

    def last(self, tool: str) -> Any:
        """The last result of ``tool``, decoded (results are JSON)."""
        return json.loads(self.results[tool][-1])

    @classmethod
    def of(cls, messages: list[dict[str, Any]]) -> Seen:
        names: dict[str, str] = {}
        texts: list[str] = []
        results: dict[str, list[str]] = {}
        for message in messages:
            for block in blocks(message):
                kind = block.get("type")
                if kind == "tool_use":
                    names[block["id"]] = block["name"]
                elif kind == "tool_result":
                    name = names.get(block.get("tool_use_id", ""), "?")
                    results.setdefault(name, []).append(text_of(block))
                elif kind == "text" and message.get("role") == "user":
                    texts.append(block.get("text", ""))
        return cls("\n".join(texts), results)


@dataclass(frozen=True)
class Call:
    """A turn in which the model calls one tool, with these arguments or those a function of
    what it has seen gives."""

    tool: str
    arguments: dict[str, Any] | Callable[[Seen], dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Say:
    """A turn in which the model answers with text and ends."""

    text: str


Step = Call | Say


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.body.get("tools", [])) if isinstance(self.body, dict) else []

    def text(self) -> str:
        """Every text the model reads in this request: system prompt and message blocks."""
        system = self.body.get("system", "") if isinstance(self.body, dict) else ""
        parts = [system] if isinstance(system, str) else [text_of(b) for b in system]
        parts += [text_of(b) for m in self.messages for b in blocks(m)]
        return "\n".join(parts)


def blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def text_of(block: dict[str, Any]) -> str:
    """The text of a text block, or of a tool_result (a string or a list of text blocks)."""
    content = block.get("content", block.get("text", ""))
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


class StandInModel:
    """``with StandInModel() as model: model.script = [Call(...), Say(...)]``; then point
    ``ANTHROPIC_BASE_URL`` at ``model.url``."""

    def __init__(self) -> None:
        self.script: list[Step] = []
        self.requests: list[Request] = []
        # Where the latest prompt starts in the conversation (after the last answer to the
        # one before): set by the first request after a reset.
        self._since: int | None = None
        # Ids stay unique across prompts: a conversation that repeats a tool_use id has Claude
        # Code take the new call for an interrupted one.
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        # A short poll: shutdown() waits for the serve loop to notice (0.5 s by default).
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> StandInModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reset(self, script: list[Step]) -> None:
        """Play ``script`` for the next prompt; forget the requests so far."""
        with self._lock:
            self.script = list(script)
            self.requests.clear()
            self._since = None

    def _prompt_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages from the latest prompt on (the first request after a reset fixes
        where it starts: after the conversation's last answer so far)."""
        with self._lock:
            if self._since is None:
                answers = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
                self._since = answers[-1] + 1 if answers else 0
            return messages[self._since :]

    # What Claude Code sent, for assertions.

    def turns(self) -> list[Request]:
        """The main conversation's requests (those that offer tools), in order."""
        return [r for r in self.requests if r.path.startswith("/v1/messages") and r.tools]

    def tool_results(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(tool name, tool_result block) for every result in the last turn's history."""
        turns = self.turns()
        if not turns:
            return
        names: dict[str, str] = {}
        for message in self._prompt_messages(turns[-1].messages):
            for block in blocks(message):
                if block.get("type") == "tool_use":
                    names[block["id"]] = block["name"]
                elif block.get("type") == "tool_result":
                    yield names.get(block.get("tool_use_id", ""), "?"), block

    def user_texts(self) -> list[str]:
        """The text blocks of the latest prompt's user messages (where a slash command's
        rendered prompt lands), as its first turn holds them."""
        turns = self.turns()
        if not turns:
            return []
        return [
            b.get("text", "")
            for m in self._prompt_messages(turns[0].messages)
            if m.get("role") == "user"
            for b in blocks(m)
            if b.get("type") == "text"
        ]

    # The server.

    def _step(self, body: dict[str, Any]) -> Step:
        messages = list(body.get("messages", []))
        if body.get("tools"):  # the main conversation (side requests offer no tools)
            messages = self._prompt_messages(messages)
        done = sum(1 for m in messages if m.get("role") == "assistant")
        with self._lock:
            step = self.script[done] if done < len(self.script) else Say("done")
        if isinstance(step, Call) and callable(step.arguments):
            try:
                return Call(step.tool, step.arguments(Seen.of(messages)))
            except Exception as exc:  # the test reads this as the run's final text
                return Say(f"stand-in script failed at {step.tool}: {type(exc).__name__}: {exc}")
        return step

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _record(self, body: Any) -> None:
                with model._lock:
                    model.requests.append(
                        Request(self.command, self.path, dict(self.headers), body)
                    )

            def _json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_HEAD(self) -> None:
                self._record(None)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                self._record(None)
                self._json(404, {"type": "error", "error": {"type": "not_found_error"}})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode(errors="replace")
                self._record(body)
                if not isinstance(body, dict):
                    self._json(400, {"type": "error", "error": {"type": "invalid_request_error"}})
                elif self.path.startswith("/v1/messages/count_tokens"):
                    self._json(200, {"input_tokens": len(raw) // 4})
                elif self.path.startswith("/v1/messages"):
                    self._answer(body, model._step(body))
                else:
                    self._json(404, {"type": "error", "error": {"type": "not_found_error"}})

            def _answer(self, body: dict[str, Any], step: Step) -> None:
                n = next(model._ids)
                if isinstance(step, Call):
                    block: dict[str, Any] = {
                        "type": "tool_use",
                        "id": f"toolu_{n:04d}",
                        "name": step.tool,
                        "input": {},
                    }
                    delta = {"type": "input_json_delta", "partial_json": json.dumps(step.arguments)}
                    stop = "tool_use"
                else:
                    block = {"type": "text", "text": ""}
                    delta = {"type": "text_delta", "text": step.text}
                    stop = "end_turn"
                message = {
                    "id": f"msg_{n:04d}",
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model", "stand-in"),
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                }
                if not body.get("stream"):
                    full = dict(block)
                    if isinstance(step, Call):
                        full["input"] = step.arguments
                    else:
                        full["text"] = step.text
                    self._json(200, {**message, "content": [full], "stop_reason": stop})
                    return
                events = [
                    ("message_start", {"message": message}),
                    ("content_block_start", {"index": 0, "content_block": block}),
                    ("content_block_delta", {"index": 0, "delta": delta}),
                    ("content_block_stop", {"index": 0}),
                    (
                        "message_delta",
                        {
                            "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 1},
                        },
                    ),
                    ("message_stop", {}),
                ]
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for name, data in events:
                    payload = json.dumps({"type": name, **data})
                    self.wfile.write(f"event: {name}\ndata: {payload}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

        return Handler
