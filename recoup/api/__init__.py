"""The HTTP API: `recoup.api.app.create_app` builds the ASGI app (imported lazily, so that
importing `recoup.api` loads no web stack)."""
