"""Trident State, pure: map kinds, their stored values, aggregators, and the record of which
source messages a stateful task applied. Backends that talk to a database live in the shell
(``squall.backends``); the bolt that drives them lives in the services."""
