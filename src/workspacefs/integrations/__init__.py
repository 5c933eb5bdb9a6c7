"""Adapters that plug a workspacefs filesystem into agent frameworks, one module per framework.

Each adapter sits behind its own extra and is imported only when asked for (``from
workspacefs.integrations.deepagents import WorkspaceBackend``): importing this package imports no framework.
"""
