"""Store-wide operations: search, stats, follow, garbage collection, upgrade checks, secret detection."""
