"""The tuple users' bolts receive (``from squall.tuples import Tuple``)."""

from squall.core.reliability.tuples import Tuple

__all__ = ["Tuple"]
