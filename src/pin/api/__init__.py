"""The HTTP API: authentication, problem documents, and the app factory."""
