"""Read-only web views on the Faust worker: where a user's row is, and why a join missed it.

``views`` registers the pages on :data:`streamapp.application.app` when the app
discovers it; everything else here is pure logic or a thin adapter it uses.
"""
