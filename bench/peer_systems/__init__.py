"""Per-peer task modules for bench/peers.py (imported by clients and workers alike)."""
