"""kmlcc: C to programs that follow the rules of verified programs."""
