"""Authorization (Kafka's StandardAuthorizer semantics): the sans-I/O rules in
``authorizer``, their durable store in ``store``, and the one helper every handler
calls in ``check``."""
