"""Run inside the docs' Django example project (see base_settings.py): migrate, `check`, then
deliver a charge request and an event as Recoup signs them, and check what the docs promise.
Prints one line per promise kept; any failure raises."""

import io
import json
from datetime import UTC, datetime

import django

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from recoup.jobs.signing import signature_headers  # noqa: E402


def deliver(client: Client, path: str, body: dict[str, object], message_id: str) -> object:
    raw = json.dumps(body)
    headers = signature_headers(
        secret=settings.RECOUP_SIGNING_SECRET,
        message_id=message_id,
        timestamp=datetime.now(UTC),
        body=raw,
    )
    headers["Idempotency-Key"] = str(body.get("idempotency_key", message_id))
    return client.post(path, data=raw, content_type="application/json", headers=headers)


call_command("migrate", run_syncdb=True, verbosity=0)
call_command("check", fail_level="WARNING", stdout=io.StringIO())
print("migrate and check: ok")

from billing.models import Invoice  # noqa: E402

Invoice.objects.create(id="inv_42", customer_id="cus_7", amount_cents=1999, currency="usd")
client = Client()
charge = {
    "invoice_id": "inv_42",
    "attempt": 1,
    "idempotency_key": "retry:inv_42:1",
    "charge_idempotency_key": "charge:inv_42:1",
    "amount": 1999,
    "currency": "usd",
    "customer_id": "cus_7",
    "scheduled_at": "2026-06-24T15:37:00Z",
}
first = deliver(client, "/recoup/charge", charge, "msg_charge_1")
assert first.status_code == 200, (first.status_code, first.content)
assert first.json()["outcome"] == "succeeded", first.json()
invoice = Invoice.objects.get(pk="inv_42")
assert invoice.status == "paid" and invoice.charge_id, (invoice.status, invoice.charge_id)
print("charge: succeeded, invoice paid")

again = deliver(client, "/recoup/charge", charge, "msg_charge_1")
assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
assert again.json() == first.json()
print("charge delivered again: replayed")

event = {"id": "evt_1", "seq": 3, "type": "invoice.recovered", "timestamp": "…", "data": {}}
answered = deliver(client, "/recoup/events", event, "evt_1")
assert answered.status_code == 200 and answered.json() == {"ok": True}, answered.content
unsigned = client.post("/recoup/events", data=json.dumps(event), content_type="application/json")
assert unsigned.status_code == 401, unsigned.status_code
print("event: answered once signed, 401 unsigned")
