"""mcp-gateway plugin ``scrape``: python-jobspy postings into the jobs queue (``scrape_jobs``)."""

__version__ = "0.1.0"
