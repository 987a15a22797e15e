"""Workers: register in ZooKeeper, watch their assignment, run its tasks as child processes."""
