"""Agent processes, one per framework: `python -m tests.frameworks.agents.<name>`."""
