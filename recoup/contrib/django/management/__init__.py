"""The Django management commands of the recoup app (see `commands`)."""
