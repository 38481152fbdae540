"""Configuration read from files: ``hitl.yaml`` (:mod:`.hitl_yaml`) and its ``api`` and ``mcp`` sections."""
