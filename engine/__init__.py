"""Problem-agnostic search machinery: random keys, BRKGA, records, gaps, stopping."""
