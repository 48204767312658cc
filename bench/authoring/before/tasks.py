# The tasks plugin of after/tasks.py, written with the API before typed functions: a model
# class per tool, RestTool(...) declarations, a register_tools hook.
from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from gateway import Mutation, Tier, hookimpl
from gateway.rest import RestBackend, RestTool, Route

TASKS = RestBackend.define(
    "tasks",
    env_prefix="TASKS_API",
    settings_table="tasks",
    title="the tasks API",
    health_path="/health",
)

TaskId = Annotated[int, Field(strict=True, ge=1, description="Task id.")]


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Task(BaseModel):
    id: int
    title: str
    done: bool
    due: str | None = None


class TaskList(BaseModel):
    tasks: list[Task]
    total: int


class ListArgs(Args):
    done: bool | None = Field(None, description="Only done (true) or open (false) tasks.")
    limit: int = Field(20, ge=1, le=100, description="At most this many.")


class GetArgs(Args):
    task_id: TaskId


class AddArgs(Args):
    title: str = Field(min_length=1, max_length=200, description="What to do.")
    due: str | None = Field(None, pattern=r"^\d{4}-\d{2}-\d{2}$", description="YYYY-MM-DD.")


TOOLS = (
    RestTool(
        name="tasks_list",
        description="Tasks, newest first; filter by state.",
        input_model=ListArgs,
        output_model=TaskList,
        tier=Tier.READ,
        backend=TASKS,
        route=Route("GET", "/tasks", query=("done", "limit"), what="the tasks"),
    ),
    RestTool(
        name="tasks_get",
        description="One task: title, state, due date.",
        input_model=GetArgs,
        output_model=Task,
        tier=Tier.READ,
        backend=TASKS,
        route=Route(
            "GET", "/tasks/{task_id}", what="task {task_id}", status={404: "no task {task_id}"}
        ),
    ),
    RestTool(
        name="tasks_add",
        description="Add a task.",
        input_model=AddArgs,
        output_model=Task,
        tier=Tier.MUTATION,
        mutation=Mutation(
            consequence="adds a task",
            requires="nothing",
            reversible=True,
            destructive=False,
            idempotent=False,
        ),
        backend=TASKS,
        route=Route("POST", "/tasks", body=("title", "due"), what="the new task"),
    ),
)


@hookimpl
def register_tools(register: Any) -> None:
    for tool in TOOLS:
        register(tool)
