"""The round-trip canary: write events to the source, read them back on the target, judge the mirror.

Imports only ``mirrorwatch.core`` (never the mirror or the monitor), so it can watch any mirror that keeps
records' values and headers, MirrorMaker 2 included.
"""
