"""The offline engine: recaps and scene breaks with no model at all."""
