"""Extra mitmproxy addons (installed as chatkit_trace.addons)."""
