"""`autorecap serve`: the OpenAI-compatible memory proxy."""
