"""Security: listeners and their protocols, TLS, SASL mechanisms and SCRAM credentials.

Each module here is sans-I/O (state machines and pure functions a test drives without a
socket); ``broker.server`` feeds them bytes per connection.
"""
