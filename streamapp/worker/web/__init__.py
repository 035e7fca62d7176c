"""Read-only web views on the Faust worker: where a user's row is, and why a join missed it.

``views.install(app)`` registers the pages on an app (``create_app`` calls it);
everything else here is pure logic or a thin adapter it uses.
"""
