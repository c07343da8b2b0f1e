"""The middleware family: ``base`` plus one module per built-in middleware."""
