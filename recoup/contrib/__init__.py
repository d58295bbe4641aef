"""Recoup inside other frameworks, each behind an extra of its own: `recoup.contrib.django`
(`pip install 'recoup[django]'`) is the receiver as a Django app."""
