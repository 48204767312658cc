"""mcp-gateway plugin: the citation and source library of the agent orchestrator, read-only.

Eight tools (``list_job_sources``, ``get_source_detail``, ``list_job_citations``,
``get_citation_detail``, ``search_job_sources``, ``get_source_annotations``,
``get_source_tags``, ``get_citation_stats``) over the orchestrator's citation endpoints.
"""
