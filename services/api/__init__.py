"""The control-plane REST API: FastAPI over ZooKeeper."""
