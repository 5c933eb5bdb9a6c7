"""Backends. Each module holds one; none imports another (DESIGN §1)."""
