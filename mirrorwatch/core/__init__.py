"""The small shared core: config model, Kafka client construction, record types, redaction."""
