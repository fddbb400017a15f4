"""Session stores: the store contract, write-behind writer, storage codec and backends."""
