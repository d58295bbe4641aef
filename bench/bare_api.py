"""The ceiling of `bench_enqueue.py`'s HTTP rows: a bare FastAPI endpoint that validates the
same body as `POST /v1/jobs` (Recoup's own `JobIn`) and answers 201 with a small JSON body,
with no authentication, idempotency key, storage or middleware.

    python bench/bare_api.py PORT [PROCESSES]
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import uvicorn
from fastapi import FastAPI
from starlette.responses import Response

from recoup.wire.schemas import JobIn

app = FastAPI()


@app.post("/v1/jobs", status_code=201)
def create_job(body: JobIn) -> Response:
    return Response(
        b'{"id":"' + uuid.uuid4().hex.encode() + b'","state":"scheduled"}',
        status_code=201,
        media_type="application/json",
    )


if __name__ == "__main__":
    port, processes = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 1
    if processes == 1:
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
    else:  # uvicorn's own workers share the socket; they import the app by name
        here = str(Path(__file__).parent)
        uvicorn.run(
            "bare_api:app",
            host="127.0.0.1",
            port=port,
            log_level="warning",
            workers=processes,
            app_dir=here,
        )
