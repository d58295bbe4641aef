"""Example applications that use Recoup; run them from the repository root (`python -m
examples.<name>`)."""
