"""QStash's TypeScript SDK for the tests: `@upstash/qstash` installed from npm with the machine's
Node.js (the committed `qstash_js/package.json` and its lockfile, `npm ci` into a directory of
the system's temporary folder named by their hash, so it is installed once per lockfile and
reused), and `TypeScriptSdk.calls` running `qstash_js/sdk.mjs` against a served /qstash.

Without node or npm (or when the install fails) the tests are skipped with the reason; under
CI=true they fail instead, so CI never passes without having run them."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent / "qstash_js"
MANIFESTS = ("package.json", "package-lock.json")
INSTALL_SECONDS = 300
CALL_SECONDS = 60


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def installed_sdk() -> Path:
    """The directory whose node_modules holds the SDK, installing it on first use."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            _unavailable(f"{tool} is not installed (QStash's TypeScript SDK needs Node.js)")
    digest = hashlib.sha256(b"".join((HERE / name).read_bytes() for name in MANIFESTS))
    home = Path(tempfile.gettempdir()) / f"recoup-qstash-js-{digest.hexdigest()[:16]}"
    if (home / "node_modules" / "@upstash" / "qstash" / "package.json").exists():
        return home
    # Installed beside and renamed into place, so parallel test processes never see half.
    staging = Path(tempfile.mkdtemp(prefix=home.name + "-", dir=home.parent))
    for name in MANIFESTS:
        shutil.copy(HERE / name, staging / name)
    try:
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
            cwd=staging,
            check=True,
            capture_output=True,
            text=True,
            timeout=INSTALL_SECONDS,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        output = getattr(exc, "stderr", None) or ""
        _unavailable(f"npm ci of @upstash/qstash failed: {output.strip()[-500:] or exc}")
    try:
        staging.rename(home)
    except OSError:  # another process got there first
        shutil.rmtree(staging, ignore_errors=True)
    return home


@dataclass(frozen=True)
class Answer:
    """One call's answer: `ok` (the SDK's return value, as JSON) or `error` (its message)."""

    ok: Any = None
    error: str | None = None
    status: int | None = None

    @property
    def value(self) -> Any:
        assert self.error is None, f"the SDK call failed: {self.status} {self.error}"
        return self.ok


@dataclass(frozen=True)
class TypeScriptSdk:
    modules: Path
    url: str  # Recoup's /qstash
    token: str

    def calls(self, *calls: tuple[str, list[Any]]) -> list[Answer]:
        """Run `(method, args)` calls in order in one Node process (`qstash_js/sdk.mjs`)."""
        done = subprocess.run(
            ["node", str(HERE / "sdk.mjs")],
            input=json.dumps([{"call": call, "args": args} for call, args in calls]),
            env={
                "PATH": os.environ.get("PATH", ""),
                "QSTASH_JS_MODULES": str(self.modules),
                "QSTASH_URL": self.url,
                "QSTASH_TOKEN": self.token,
            },
            capture_output=True,
            text=True,
            timeout=CALL_SECONDS,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return [Answer(**found) for found in json.loads(done.stdout)]

    def call(self, call: str, *args: Any) -> Any:
        """One call's value (an assertion error with the SDK's message when it failed)."""
        [answer] = self.calls((call, list(args)))
        return answer.value


__all__ = ["Answer", "TypeScriptSdk", "installed_sdk"]
