"""The Faust worker: the app factory, its tables, transport, batch sends, counters, health and web views.

``streamapp.worker.app.create_app(settings)`` builds it; importing this package builds nothing.
"""
