"""A user's billing app, as small as it can be: invoices, the deliveries its webhook view
recorded, and how `recoup.contrib.django` locks and pays an invoice."""
