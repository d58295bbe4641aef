"""The PostgreSQL backend (production, many hosts)."""
