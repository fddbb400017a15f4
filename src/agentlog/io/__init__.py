"""Other tools' sessions in and agentlog sessions out: one module per format, pure functions."""
