"""OpenClaw: sessions of a Gateway, messaged with its `agent` request."""
