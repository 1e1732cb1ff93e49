"""broker/handlers."""
