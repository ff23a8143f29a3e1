"""Multi-tenant racks (Morphlux arXiv 2508.03674, Lumorph arXiv 2501.18169, Propius arXiv
2510.19617), a scenario kind: tenant jobs, a job manager with Propius' policies simulated over a
request trace (:func:`emulation.tenancy.replay.simulate_job_manager`), and tenants on packets.
It uses the rack model :mod:`topologies.torus_rack` and the slice allocators
:mod:`emulation.planners.allocators`."""
