"""Runner: selects the configured Host factory and drives deliveries through it."""
