"""The HTTP API: `recoup.api.app.create_app` builds the ASGI app (imported lazily so the
storage backends can use `recoup.api.tokens` without loading the web stack)."""
