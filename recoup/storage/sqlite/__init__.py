"""The SQLite backend (embedded default)."""
