"""Recording an agent loop: ``Recorder``, ``Turn`` and ``Step`` write well-formed turns and steps."""
