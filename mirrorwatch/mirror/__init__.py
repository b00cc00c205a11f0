"""mirror/: the bundled mirror engine (consume → produce → commit after ack), heartbeats, offset syncs,
checkpoints and failover tools. Depends on mirrorwatch.core only."""
