"""What a run may use: the offered set (pure, ``base``), the built-ins, OpenAPI and code tools, and the
guarded ``fetch`` client."""
