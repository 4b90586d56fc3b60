"""API keys: create, list and revoke (admin)."""
