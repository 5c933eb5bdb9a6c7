"""Adapters that plug workspacefs into agent frameworks, each behind its own extra and imported on use."""
