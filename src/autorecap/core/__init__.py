"""The pure core: chat model, message data API, tokens. No I/O happens here."""
