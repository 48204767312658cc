"""Fixtures of the scrape plugin's tests (defined in scrape_testutil)."""

from scrape_testutil import recorded, scrape_gateway

__all__ = ["recorded", "scrape_gateway"]
