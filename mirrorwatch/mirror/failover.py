"""Failover tools (filled in below)."""
commands: list = []
