"""Multi-tenant racks (Morphlux arXiv 2508.03674, Lumorph arXiv 2501.18169, Propius arXiv
2510.19617), a scenario kind (its scenario model and wiring are :mod:`emulation.kinds.tenancy`):
the report of its results.

Its layers: the tenant jobs :mod:`emulation.workloads.tenant_jobs`; the job manager with
Propius' policies :mod:`emulation.flowsim.job_manager` (metrics :mod:`emulation.flowsim.job_metrics`;
every allocator with every policy, the sweep's section and result :mod:`emulation.flowsim.rack_sweep`);
the rack model :mod:`topologies.torus_rack`; the slice allocators :mod:`emulation.planners.allocators`;
tenants on packets beside the flow backend :mod:`emulation.tenants_packet`."""
