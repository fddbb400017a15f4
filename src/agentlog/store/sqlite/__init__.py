"""The SQLite store: one database file, a row per event, packed chunk runs, an FTS5 search index."""
