"""``mirrorwatch doctor``: a preflight of a config against its clusters (reachability, authentication, the
ACLs each component needs, the flow's topics, clock skew). Imports only ``mirrorwatch.core``."""
