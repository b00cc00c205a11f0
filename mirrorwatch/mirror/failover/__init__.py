"""Failover tools: where consumer groups resume on the target (``mirror failover translate``, ``reset-to-time``),
whether a flow is ready to fail over (``check``, judged by ``readiness``), and a rehearsal on local clusters
(``drill``). They read what the engine publishes (offset syncs, checkpoints, heartbeats); the engine imports
nothing from here."""
