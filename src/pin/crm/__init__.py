"""The crm context."""
