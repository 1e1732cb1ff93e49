"""Security: listeners and their protocols, TLS, SASL mechanisms and SCRAM credentials.

Each module here is sans-I/O (state machines and pure functions a test drives without a
socket); ``broker.connection`` feeds them bytes per connection.
"""
