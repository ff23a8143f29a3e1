"""OS-Ken apps emulating optical circuit switches and multi-hop routing, and their launcher
(``python -m controllers``). Importing this package starts nothing."""
