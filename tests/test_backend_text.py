"""What a backend writes never leaks through the gateway: database text in an error's reason
(issue 21, item 9) and basic-auth credentials a backend echoes (item 10), against real HTTP
servers on 127.0.0.1."""

from __future__ import annotations

import base64
import json
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ConfigDict, SecretStr

from gateway import Tier, env_field, hookimpl
from gateway.errors import DATABASE_ERROR, Sanitizer
from gateway.rest import (
    RestBackend,
    RestContext,
    RestSettings,
    RestTool,
    backend_reason,
    basic_auth,
)
from gateway.testing import make_gateway
from gateway.testing.backends import FakeBackend, Reply

pytestmark = pytest.mark.anyio

POSTGRES = [
    'duplicate key value violates unique constraint "users_email_key"\n'
    "DETAIL:  Key (email)=(alice@example.com) already exists.",
    'connection to server at "pg-primary.internal.corp" (10.20.30.40), port 5432 failed: '
    "Connection refused",
    'FATAL:  password authentication failed for user "cockpit_admin"',
    'syntax error at or near "ORDER"\nLINE 1: SELECT id, email, password_hash, api_token, '
    + ", ".join(f"column_{i}" for i in range(60))
    + " FROM users ORDER",
    '(psycopg2.errors.ForeignKeyViolation) insert or update on table "jobs" violates foreign '
    'key constraint "jobs_owner_fkey"',
    'relation "job_secrets" does not exist',
    "sqlalchemy.exc.OperationalError: (psycopg2.OperationalError) could not translate host "
    'name "db.internal" to address',
    "ERROR: canceling statement due to statement timeout [SQL: UPDATE jobs SET status=%(s)s]",
]
MYSQL = [
    "(1062, \"Duplicate entry 'alice@example.com' for key 'users.email'\")",
    "ERROR 1045 (28000): Access denied for user 'root'@'10.0.0.5' (using password: YES)",
    "You have an error in your SQL syntax; check the manual that corresponds to your MySQL "
    "server version for the right syntax to use near 'FROM users' at line 1",
    "Unknown column 'api_token' in 'field list'",
    "Table 'cockpit.job_secrets' doesn't exist",
    "(2003, \"Can't connect to MySQL server on 'db.internal' (111)\")",
    "Cannot add or update a child row: a foreign key constraint fails (`cockpit`.`jobs`)",
]
SQLITE = [
    "UNIQUE constraint failed: users.email",
    "sqlite3.OperationalError: no such table: job_secrets",
    "NOT NULL constraint failed: jobs.owner_id",
    'near "FROM": syntax error',
    "table jobs has no column named secret",
    "database is locked",
]
OTHERS = [
    'E11000 duplicate key error collection: cockpit.users index: email_1 dup key: { email: "a@b.c" }',
    "ORA-00001: unique constraint (COCKPIT.USERS_EMAIL) violated",
    "[Microsoft][ODBC Driver 18 for SQL Server][SQL Server]Invalid object name 'jobs'.",
]
# What backends say on purpose, which must stay readable.
PLAIN = [
    "job is in state completed",
    "limit: Input should be less than 501",
    "Git Repository is empty.",
    "invalid username, password or token",
    "token does not have at least one of required scope(s), required=[read:repository]",
    "no valid ref or sha: main~1",
    "sha not found [0123abc]",
    "Only signed in user is allowed to call APIs.",
    "the table is full; delete rows first",
    "Job 0c3 cannot be approved: its status is completed, not review",
    "value is not a valid uuid",
    "a job with this description already exists",
]


@pytest.mark.parametrize("text", POSTGRES + MYSQL + SQLITE + OTHERS)
def test_database_text_becomes_one_plain_sentence(text):
    sanitizer = Sanitizer(["tok-secret-999"])
    assert sanitizer.backend_text(text, 300) == DATABASE_ERROR
    for body in (text.encode(), json.dumps({"detail": text}).encode()):
        assert backend_reason(body, sanitizer) == DATABASE_ERROR
    assert backend_reason({"message": text}) == DATABASE_ERROR


@pytest.mark.parametrize("text", PLAIN)
def test_what_a_backend_says_on_purpose_stays_as_it_is(text):
    assert backend_reason(json.dumps({"detail": text}).encode(), Sanitizer()) == text


def test_a_reason_is_sanitized_before_it_is_cut():
    secret = "tok-secret-0123456789-abcdef"
    sanitizer = Sanitizer([secret])
    reason = backend_reason({"detail": "x" * 285 + " " + secret + " was refused"}, sanitizer)
    assert len(reason) == 300 and reason.endswith("…")
    assert secret[:8] not in reason  # neither whole nor in part
    sql = (
        "could not run: INSERT INTO users (email, password_hash, api_token) VALUES "
        + "(1, 2, 3), " * 40
    )
    assert "password_hash" not in backend_reason({"detail": sql}, sanitizer)


# --- through the REST kit --------------------------------------------------------------------


class ProbeSettings(RestSettings):
    env_prefix: ClassVar[str] = "PROBE_API"
    user: str | None = env_field("PROBE_API_USER", default=None, description="Basic-auth user")
    password: SecretStr | None = env_field(
        "PROBE_API_PASSWORD", default=None, description="Basic-auth password"
    )


def _basic(settings: ProbeSettings) -> dict[str, str]:
    if settings.user and settings.password:
        return basic_auth(settings.user, settings.password.get_secret_value())
    return {}


PROBE = RestBackend(
    name="probe", settings=ProbeSettings, settings_table="probe", title="the probe API", auth=_basic
)


class PathArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str


async def _get(args: PathArgs, ctx: RestContext[Any]) -> Any:
    return (await ctx.client.answer("GET", "/" + args.path, what="the probe")).data


GET = RestTool(
    name="probe_get",
    description="GET a path.",
    input_model=PathArgs,
    tier=Tier.READ,
    backend=PROBE,
    run=_get,
)


class _Plugin:
    @hookimpl
    def register_tools(self, register: Any) -> None:
        register(GET)


class Echo(FakeBackend):
    """Answers ``/echo`` with the Authorization header it received, in data and in an error."""

    def respond(self, request: Any) -> Reply:
        seen = request.headers.get("authorization", "")
        credential = seen.partition(" ")[2]
        pair = base64.b64decode(credential).decode() if credential else ""
        if request.path == "/echo":
            return Reply.json({"seen": seen, "credential": credential, "pair": pair})
        if request.path == "/refuse":
            return Reply.json({"detail": f"credentials {credential} ({pair}) are locked"}, 409)
        return Reply.json({"detail": "Not Found"}, 404)


def _gateway(tmp_path: Any, table: dict[str, Any]) -> Any:
    return make_gateway(
        objects={"probe": _Plugin()},
        entry_points=False,
        plugin_config={"probe": {"request_timeout": 5, **table}},
        env={},
        cwd=tmp_path,
    )


@pytest.mark.parametrize("status", [409, 422, 500, 502, 503])
async def test_database_text_in_a_backends_error_never_reaches_the_client(tmp_path, status):
    with Echo() as api:
        for i, text in enumerate(POSTGRES[:4]):
            api.override(f"/db{i}", Reply.json({"detail": text}, status))
        async with _gateway(tmp_path, {"url": api.url}) as gw:
            results = [await gw.call("probe_get", {"path": f"db{i}"}) for i in range(4)]
    for result in results:
        assert result.is_error
        message = result.payload["error"]["message"]
        assert message.count(DATABASE_ERROR) == 1, message
        for leak in ("alice@", "10.20.30.40", "pg-primary", "cockpit_admin", "password_hash"):
            assert leak not in result.text(), (leak, message)


@pytest.mark.parametrize("where", ["url", "settings"])
async def test_basic_credentials_a_backend_echoes_are_redacted_in_every_form(tmp_path, where):
    user, password = "svc-reader", "Pa55-word-77"
    encoded = base64.b64encode(f"{user}:{password}".encode()).decode()
    with Echo() as api:
        if where == "url":
            table = {"url": api.url.replace("http://", f"http://{user}:{password}@")}
        else:
            table = {"url": api.url, "user": user, "password": password}
        async with _gateway(tmp_path, table) as gw:
            echoed = await gw.call("probe_get", {"path": "echo"})
            refused = await gw.call("probe_get", {"path": "refuse"})
    assert api.requests[0].headers["authorization"] == f"Basic {encoded}"  # what was sent
    assert not echoed.is_error and refused.is_error
    for result in (echoed, refused):
        text = result.text()
        for form in (encoded, encoded.rstrip("="), f"{user}:{password}", password):
            assert form not in text, (form, text)
    assert echoed.payload["credential"] == "[REDACTED]"
    assert echoed.payload["pair"] == "[REDACTED]"
    assert "credentials [REDACTED] ([REDACTED]) are locked" in refused.payload["error"]["message"]
