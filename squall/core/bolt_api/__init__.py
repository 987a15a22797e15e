"""The bolt APIs users write against: bolts, keyed state, batch bolts' I/O."""
