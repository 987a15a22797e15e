"""Acker service: one task per partition of ``squall.<topo>.acker``, tracking trees in a ledger.

Built on :class:`squall.core.reliability.ledger.Ledger` and the wire formats of
:mod:`squall.core.wire.internal`.
"""
