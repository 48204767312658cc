# The tasks plugin of after/tasks.py in FastMCP: the same tools, parameters, descriptions and
# constraints, the same error for an unknown task, the MCP annotations stated by hand.
from __future__ import annotations

import os
from typing import Annotated

import httpx
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import BaseModel, Field

mcp = FastMCP("tasks")
API_URL = os.environ.get("TASKS_API_URL", "")
TOKEN = os.environ.get("TASKS_API_TOKEN", "")

TaskId = Annotated[int, Field(strict=True, ge=1, description="Task id.")]


class Task(BaseModel):
    id: int
    title: str
    done: bool
    due: str | None = None


class TaskList(BaseModel):
    tasks: list[Task]
    total: int


def _client() -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {TOKEN}"} if TOKEN else {}
    return httpx.AsyncClient(base_url=API_URL, headers=headers, timeout=15)


@mcp.tool(annotations={"readOnlyHint": True, "openWorldHint": True})
async def tasks_list(
    done: bool | None = Field(None, description="Only done (true) or open (false) tasks."),
    limit: Annotated[int, Field(ge=1, le=100, description="At most this many.")] = 20,
) -> TaskList:
    """Tasks, newest first; filter by state."""
    params = {"limit": limit} if done is None else {"limit": limit, "done": done}
    async with _client() as client:
        answer = await client.get("/tasks", params=params)
    answer.raise_for_status()
    return TaskList.model_validate(answer.json())


@mcp.tool(annotations={"readOnlyHint": True, "openWorldHint": True})
async def tasks_get(task_id: TaskId) -> Task:
    """One task: title, state, due date."""
    async with _client() as client:
        answer = await client.get(f"/tasks/{task_id}")
    if answer.status_code == 404:
        raise ToolError(f"no task {task_id}")
    answer.raise_for_status()
    return Task.model_validate(answer.json())


@mcp.tool(annotations={"destructiveHint": False, "idempotentHint": False, "openWorldHint": True})
async def tasks_add(
    title: Annotated[str, Field(min_length=1, max_length=200, description="What to do.")],
    due: str | None = Field(None, pattern=r"^\d{4}-\d{2}-\d{2}$", description="YYYY-MM-DD."),
) -> Task:
    """Add a task."""
    body = {"title": title} if due is None else {"title": title, "due": due}
    async with _client() as client:
        answer = await client.post("/tasks", json=body)
    answer.raise_for_status()
    return Task.model_validate(answer.json())
