"""The DSH legacy-format upgrade: entered only when a header or an event says the data is legacy."""
