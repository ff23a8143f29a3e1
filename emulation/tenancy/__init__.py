"""Multi-tenant racks: slices, allocators (contiguous torus, photonic), a job manager with
Propius' policies, and the event-driven replay of a request trace."""
