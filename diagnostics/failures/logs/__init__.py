"""Reading a run's logs in bounded memory: which rank wrote a line, where a catalogue pattern can match."""
