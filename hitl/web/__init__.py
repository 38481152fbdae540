"""The web inbox: a reviewer signs in with OpenID Connect and decides on a page ``hitl serve`` draws (``web:`` in
hitl.yaml). Internal: part of the composition root, reached through ``hitl serve``."""
