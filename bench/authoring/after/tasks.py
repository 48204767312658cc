# Three tools over the tasks API (tasks_api.py) in the gateway's REST dialect, typed functions.
from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from gateway import Mutation, Plugin
from gateway.rest import RestBackend, RestContext, RestTools, Route

TASKS = RestBackend.define(
    "tasks",
    env_prefix="TASKS_API",
    settings_table="tasks",
    title="the tasks API",
    health_path="/health",
)
api = RestTools(TASKS)
plugin = Plugin(tools=api)

TaskId = Annotated[int, Field(strict=True, ge=1, description="Task id.")]


class Task(BaseModel):
    id: int
    title: str
    done: bool
    due: str | None = None


class TaskList(BaseModel):
    tasks: list[Task]
    total: int


LIST = Route("GET", "/tasks", query=("done", "limit"), what="the tasks")
GET = Route("GET", "/tasks/{task_id}", what="task {task_id}", status={404: "no task {task_id}"})
ADD = Route("POST", "/tasks", body=("title", "due"), what="the new task")


@api.read
async def tasks_list(
    done: bool | None = Field(None, description="Only done (true) or open (false) tasks."),
    limit: Annotated[int, Field(ge=1, le=100, description="At most this many.")] = 20,
    *,
    ctx: RestContext[Any],
) -> TaskList:
    """Tasks, newest first; filter by state."""
    return await ctx.fetch(LIST, TaskList)


@api.read
async def tasks_get(task_id: TaskId, *, ctx: RestContext[Any]) -> Task:
    """One task: title, state, due date."""
    return await ctx.fetch(GET, Task)


@api.mutation(
    Mutation(
        consequence="adds a task",
        requires="nothing",
        reversible=True,
        destructive=False,
        idempotent=False,
    )
)
async def tasks_add(
    title: Annotated[str, Field(min_length=1, max_length=200, description="What to do.")],
    due: str | None = Field(None, pattern=r"^\d{4}-\d{2}-\d{2}$", description="YYYY-MM-DD."),
    *,
    ctx: RestContext[Any],
) -> Task:
    """Add a task."""
    return await ctx.fetch(ADD, Task)
