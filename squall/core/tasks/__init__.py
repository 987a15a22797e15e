"""Each service's pure state machine: the spout task, the acker task and the bolt
executor, with time and I/O passed in."""
