"""The API's routers: health and metrics, our own routes, the topology page, Storm UI's."""
