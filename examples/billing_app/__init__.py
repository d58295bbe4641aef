"""An example billing app: the reference charge endpoint for Recoup, built with
`recoup.receiver`.

It keeps invoices in its own SQLite database, charges them through the simulated gateway, and
serves `POST /recoup/charge`, the endpoint Recoup calls at each retry's instant. Start it with:

    .venv/bin/python -m examples.billing_app --port 8001 --secret whsec_... \\
        [--db billing.db] [--gateway-url http://127.0.0.1:8090]

Then script a dunning run against a Recoup server with `examples/billing_app/simulate.py`.
"""
