"""Short torch programs that measure or show one thing: all-reduce, the rendezvous, torch's facts, failure demos."""
