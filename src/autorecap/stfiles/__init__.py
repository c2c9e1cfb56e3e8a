"""SillyTavern's files: chat JSONL read and written losslessly."""
