"""The ``scrape`` plugin: ``scrape_jobs`` feeds fresh postings into the jobs queue.

Nothing heavy is imported here: python-jobspy, pandas and numpy load on the first real scrape.
The source of postings is ``plugin.resources["source"]`` (python-jobspy unless something else
was put there, as the tests do with a :class:`~gateway_scrape.sources.RecordedSource`), and the
preflight's DNS resolver ``plugin.resources["resolve"]`` (the system's, unless replaced).
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

from pydantic import BaseModel

from gateway import HealthCheck, Mutation, PluginContext, Tier, ToolContext, ToolSpec, hookimpl

from .models import MAX_TERMS, ScrapeArgs, ScrapeResult, Settings
from .sources import JobSpySource

DESCRIPTION = (
    "Scrape fresh job postings for several search terms with python-jobspy (LinkedIn by "
    "default), normalize them and insert the new ones into the jobs queue with status 'new' "
    "for triage. Terms run in order and are isolated: a term whose DNS preflight or scrape "
    "fails is reported in results[] with its reason and the others go on. Rows are "
    "deduplicated on url (inserted_count vs duplicate_count); existing rows are never changed, "
    "so calling again is safe. dry_run=true scrapes and counts without touching the database. "
    f"At most {MAX_TERMS} terms per call; scraping takes seconds to minutes per term and "
    "progress is reported per term. Writes one capture JSON per term unless "
    "save_capture_json=false."
)


def default_source(settings: Settings) -> JobSpySource:
    return JobSpySource(
        country_indeed=settings.country_indeed, fetch_description=settings.fetch_description
    )


async def scrape_jobs(args: ScrapeArgs, ctx: ToolContext[Settings]) -> ScrapeResult:
    # The run's code on the first scrape, not with the plugin: every gateway start imports
    # this module to register the tool (run, preflight, capture and reasons: ~1.8 ms).
    from .preflight import resolve_host
    from .run import Run

    resources = ctx.resources
    source = resources.get("source") or default_source(ctx.settings)
    run = Run(
        args,
        ctx,
        source,
        ctx.sanitize,
        time_limit=ctx.settings.timeout_seconds,
        resolve=resources.get("resolve") or resolve_host,
    )
    return await run.execute()


@hookimpl
def plugin_settings() -> type[BaseModel]:
    return Settings


@hookimpl
def register_tools(register: Any, plugin: PluginContext[Settings]) -> None:
    register(
        ToolSpec(
            name="scrape_jobs",
            title="Scrape jobs into the queue",
            description=DESCRIPTION,
            input_model=ScrapeArgs,
            output_model=ScrapeResult,
            handler=scrape_jobs,
            tier=Tier.MUTATION,
            mutation=Mutation(
                consequence="inserts newly found postings as rows of the jobs database "
                "(and writes capture JSON files); existing rows are left exactly as they are",
                requires="network access to the job boards; the database and its folders are "
                "created if missing",
                # Inserted rows can only be removed by hand (no tool deletes jobs).
                reversible=False,
                destructive=False,
                idempotent=True,
            ),
            timeout=plugin.settings.timeout_seconds,
            open_world=True,
        )
    )


@hookimpl
def register_health_checks(register: Any) -> None:
    async def jobspy_installed() -> str:
        # Metadata only: importing python-jobspy would pull pandas into the gateway.
        return f"python-jobspy {importlib.metadata.version('python-jobspy')}"

    register(HealthCheck(name="jobspy", check=jobspy_installed))


@hookimpl
def open_resources(plugin: PluginContext[Settings]) -> None:
    plugin.resources.setdefault("source", default_source(plugin.settings))


@hookimpl
def close_resources(plugin: PluginContext[Settings]) -> None:
    plugin.resources.pop("source", None)
