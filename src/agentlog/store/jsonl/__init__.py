"""The JSONL store: DSH format v0 transcripts (raw or zstd frames), one directory per session."""
