"""Example adapters: the seed's "my protocol" rewritten in Python."""
