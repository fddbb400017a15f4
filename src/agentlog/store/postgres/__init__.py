"""The PostgreSQL store: many hosts sharing one database, advisory-lock writers, LISTEN/NOTIFY follow."""
