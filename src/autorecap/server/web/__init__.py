"""The web UI: plain HTML, CSS and ES modules in `static/` (no build step, no framework, no
CDN), served by `routes`. The page speaks only to the REST API under `/api`, so this package
imports nothing of autorecap's.
"""
