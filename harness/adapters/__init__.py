"""Adapters: third-party durable-execution engines run as the system under test (DESIGN.md §5)."""
