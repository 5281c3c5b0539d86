"""Fixtures of the publisher tests: staged variant dirs like the builder's, a LocalPublisher."""

from kh_hub_fixtures import hub, stage  # noqa: F401  (fixtures of these tests)
